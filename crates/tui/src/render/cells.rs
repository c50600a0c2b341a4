//! Copying buffer cells by their bytes: the one place of the crate with `unsafe` code.
//!
//! A frame of the transcript pane mostly copies cells it drew before (rows of the last
//! frame, ready cells of common characters). `Cell::clone` is correct but slow for this:
//! rustc copies the `Option<CompactString>` symbol through a stack temporary in two stores
//! and reads it back in a load spanning both, which the CPU cannot forward (a stall of tens
//! of cycles per cell, half the time of a frame after a streamed delta; docs/performance.md).
//! A cell whose symbol is stored inline owns nothing outside its own bytes, so copying its
//! bytes is a clone; [`InlineCells`] holds only such cells, and [`InlineCells::copy_to`]
//! copies them with one `memcpy`.
#![allow(unsafe_code)]

use ratatui::buffer::Cell;

// What makes a copy of a cell's bytes a clone (ratatui-core 0.1): its fields are the symbol,
// an `Option<CompactString>` (24 bytes: up to 24 bytes inline, or a pointer), and `Copy`
// values (colours, modifier, diff option, skip flag). A field owning memory would change
// the size: then read `Cell` again before changing this number.
const _: () = assert!(
    size_of::<Cell>() == 48,
    "ratatui's Cell changed: re-check cells.rs"
);

/// Cells whose symbols all lie in the cells' own bytes.
pub(super) struct InlineCells(Vec<Cell>);

impl InlineCells {
    /// `cells`, with a missing symbol (`Cell::EMPTY`'s, drawn as a space) stored as an
    /// inline space, which compares equal; `None` when another symbol is not inline (a
    /// grapheme cluster over 24 bytes).
    pub(super) fn new(mut cells: Vec<Cell>) -> Option<Self> {
        for cell in &mut cells {
            if !is_inline(cell) {
                if cell.symbol() != " " {
                    return None;
                }
                cell.set_symbol(" ");
            }
        }
        Some(Self(cells))
    }

    pub(super) fn len(&self) -> usize {
        self.0.len()
    }

    #[cfg(test)]
    pub(super) fn as_slice(&self) -> &[Cell] {
        &self.0
    }

    /// `target.clone_from_slice(self)`, as a copy of bytes.
    ///
    /// # Panics
    /// When the lengths differ.
    pub(super) fn copy_to(&self, target: &mut [Cell]) {
        Self::copy(&self.0, target);
    }

    /// `*target = self[index].clone()`, as a copy of bytes.
    pub(super) fn copy_one(&self, index: usize, target: &mut Cell) {
        Self::copy(
            std::slice::from_ref(&self.0[index]),
            std::slice::from_mut(target),
        );
    }

    fn copy(source: &[Cell], target: &mut [Cell]) {
        assert_eq!(
            source.len(),
            target.len(),
            "cells copied to a slice of another length"
        );
        let len = target.len();
        let target = target.as_mut_ptr();
        // SAFETY: `target` is a valid, exclusively borrowed slice of initialised cells: they
        // are dropped in place and their memory is then written with `source.len()` (its
        // length) cells, so every cell of it is initialised again and nothing runs in between
        // (no panic can leave a dropped cell behind). `source` is borrowed, so the two do
        // not overlap. Each source cell's symbol is inline (checked by `InlineCells::new`)
        // and its other fields are `Copy`, so a cell made of its bytes owns nothing the
        // source cell owns: the copies are independent values, as clones are.
        unsafe {
            std::ptr::drop_in_place(std::ptr::slice_from_raw_parts_mut(target, len));
            std::ptr::copy_nonoverlapping(source.as_ptr(), target, len);
        }
    }
}

/// The symbol's bytes lie within the cell: `CompactString`'s inline form, which owns nothing.
fn is_inline(cell: &Cell) -> bool {
    let start = std::ptr::from_ref(cell).addr();
    let symbol = cell.symbol();
    let at = symbol.as_ptr().addr();
    at >= start && at + symbol.len() <= start + size_of::<Cell>()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::style::{Color, Modifier};

    fn cell(symbol: &str) -> Cell {
        let mut cell = Cell::EMPTY;
        cell.set_symbol(symbol);
        cell.fg = Color::Rgb(1, 2, 3);
        cell.modifier = Modifier::BOLD;
        cell
    }

    #[test]
    fn copies_equal_clones_and_outlive_their_source() {
        let mut empty = Cell::EMPTY;
        empty.bg = Color::Blue;
        let source = vec![
            cell("a"),
            cell("é"),
            empty,
            cell("👩‍🔬"),
            cell(&"x".repeat(24)),
        ];
        let inline = InlineCells::new(source.clone()).expect("all short");
        let mut target = vec![cell("old"); source.len()];
        inline.copy_to(&mut target);
        assert_eq!(target, source);
        drop(inline);
        assert_eq!(target, source, "the copies own their symbols");
        let mut one = cell("z");
        InlineCells::new(source.clone())
            .unwrap()
            .copy_one(1, &mut one);
        assert_eq!(one, source[1]);
    }

    #[test]
    fn a_symbol_too_long_to_be_inline_is_refused() {
        assert!(InlineCells::new(vec![cell("a"), cell(&"x".repeat(25))]).is_none());
        // a family of four: 25 bytes in one grapheme cluster
        assert!(InlineCells::new(vec![cell("👨‍👩‍👧‍👦")]).is_none());
    }

    #[test]
    #[should_panic(expected = "another length")]
    fn lengths_must_match() {
        InlineCells::new(vec![cell("a")])
            .unwrap()
            .copy_to(&mut [Cell::EMPTY, Cell::EMPTY]);
    }
}

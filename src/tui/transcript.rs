//! Interim transcript model with the same API as `render::transcript::Transcript`, used until
//! the render work lands on `main` (then this file becomes a re-export). Plain wrapping, no
//! markdown; cached per (entry, width).

use std::cell::RefCell;
use std::collections::HashMap;

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style, Stylize};
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;
use unicode_width::UnicodeWidthStr;

use crate::api::Role;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EntryId(pub usize);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryState {
    Complete,
    Streaming,
    Interrupted,
    Failed,
}

#[derive(Debug, Clone)]
pub struct Entry {
    pub role: Role,
    pub content: String,
    pub state: EntryState,
    pub header: String,
}

#[derive(Debug, Default)]
pub struct Transcript {
    entries: Vec<Entry>,
    cache: RefCell<HashMap<(usize, u16), Vec<Line<'static>>>>,
}

impl Transcript {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn push(&mut self, entry: Entry) -> EntryId {
        self.entries.push(entry);
        EntryId(self.entries.len() - 1)
    }

    pub fn append_delta(&mut self, id: EntryId, text: &str) {
        if let Some(e) = self.entries.get_mut(id.0) {
            e.content.push_str(text);
            self.cache.borrow_mut().retain(|(i, _), _| *i != id.0);
        }
    }

    pub fn set_state(&mut self, id: EntryId, state: EntryState) {
        if let Some(e) = self.entries.get_mut(id.0) {
            e.state = state;
            self.cache.borrow_mut().retain(|(i, _), _| *i != id.0);
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn lines(&self, idx: usize, width: u16) -> Vec<Line<'static>> {
        if let Some(l) = self.cache.borrow().get(&(idx, width)) {
            return l.clone();
        }
        let e = &self.entries[idx];
        let mut out = vec![Line::from(Span::styled(
            e.header.clone(),
            Style::default().add_modifier(Modifier::BOLD),
        ))];
        for raw in e.content.split('\n') {
            let mut cur = String::new();
            for word in raw.split(' ') {
                let w = cur.width() + word.width() + usize::from(!cur.is_empty());
                if w > width as usize && !cur.is_empty() {
                    out.push(Line::from(std::mem::take(&mut cur)));
                }
                if !cur.is_empty() {
                    cur.push(' ');
                }
                cur.push_str(word);
            }
            out.push(Line::from(cur));
        }
        match e.state {
            EntryState::Streaming => out.push(Line::from("▍".dim())),
            EntryState::Interrupted => out.push(Line::from("[stopped]".dim())),
            EntryState::Failed => out.push(Line::from("[failed]".red())),
            EntryState::Complete => {}
        }
        out.push(Line::from(""));
        self.cache.borrow_mut().insert((idx, width), out.clone());
        out
    }

    pub fn height(&self, width: u16) -> usize {
        (0..self.entries.len())
            .map(|i| self.lines(i, width).len())
            .sum()
    }

    pub fn entry_at_line(&self, width: u16, line: usize) -> Option<EntryId> {
        let mut acc = 0;
        for i in 0..self.entries.len() {
            acc += self.lines(i, width).len();
            if line < acc {
                return Some(EntryId(i));
            }
        }
        None
    }

    pub fn line_range_of(&self, width: u16, id: EntryId) -> Option<std::ops::Range<usize>> {
        let mut acc = 0;
        for i in 0..self.entries.len() {
            let h = self.lines(i, width).len();
            if i == id.0 {
                return Some(acc..acc + h);
            }
            acc += h;
        }
        None
    }

    pub fn render(&self, area: Rect, buf: &mut Buffer, top: usize, selected: Option<EntryId>) {
        let mut line_no = 0usize;
        let mut y = area.y;
        for i in 0..self.entries.len() {
            let lines = self.lines(i, area.width);
            for l in lines {
                if line_no >= top && y < area.bottom() {
                    let mut l = l;
                    if selected == Some(EntryId(i)) {
                        l = l.patch_style(Style::default().add_modifier(Modifier::REVERSED));
                    }
                    l.render(Rect::new(area.x, y, area.width, 1), buf);
                    y += 1;
                }
                line_no += 1;
            }
        }
    }
}

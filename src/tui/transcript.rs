//! Interim transcript model with the API of `render::transcript::Transcript`, used until the
//! render work lands on `main` (then this file becomes a re-export). Plain wrapping, no
//! markdown; cached per (entry, width).

use std::cell::RefCell;
use std::collections::HashMap;
use std::ops::Range;

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style, Stylize};
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;
use unicode_width::UnicodeWidthStr;

use crate::api::Role;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EntryId(pub u64);

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryState {
    Complete,
    Streaming,
    Interrupted,
    Failed(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub role: Role,
    pub content: String,
    pub state: EntryState,
    pub header: String,
}

impl Entry {
    pub fn new(role: Role, content: impl Into<String>, header: impl Into<String>) -> Self {
        Entry {
            role,
            content: content.into(),
            state: EntryState::Complete,
            header: header.into(),
        }
    }
    pub fn streaming(role: Role, header: impl Into<String>) -> Self {
        Entry {
            state: EntryState::Streaming,
            ..Self::new(role, String::new(), header)
        }
    }
}

#[derive(Debug, Default)]
pub struct Transcript {
    entries: Vec<(EntryId, Entry)>,
    next_id: u64,
    cache: RefCell<HashMap<(u64, u16), Vec<Line<'static>>>>,
}

impl Transcript {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn push(&mut self, entry: Entry) -> EntryId {
        let id = EntryId(self.next_id);
        self.next_id += 1;
        self.entries.push((id, entry));
        id
    }

    fn get_mut(&mut self, id: EntryId) -> Option<&mut Entry> {
        self.cache.get_mut().retain(|(i, _), _| *i != id.0);
        self.entries
            .iter_mut()
            .find(|(i, _)| *i == id)
            .map(|(_, e)| e)
    }

    pub fn append_delta(&mut self, id: EntryId, text: &str) {
        if let Some(e) = self.get_mut(id) {
            e.content.push_str(text);
        }
    }

    pub fn set_content(&mut self, id: EntryId, content: impl Into<String>) {
        if let Some(e) = self.get_mut(id) {
            e.content = content.into();
        }
    }

    pub fn set_state(&mut self, id: EntryId, state: EntryState) {
        if let Some(e) = self.get_mut(id) {
            e.state = state;
        }
    }

    pub fn set_header(&mut self, id: EntryId, header: impl Into<String>) {
        if let Some(e) = self.get_mut(id) {
            e.header = header.into();
        }
    }

    pub fn remove(&mut self, id: EntryId) -> Option<Entry> {
        let i = self.entries.iter().position(|(e, _)| *e == id)?;
        self.cache.get_mut().retain(|(i, _), _| *i != id.0);
        Some(self.entries.remove(i).1)
    }

    pub fn clear(&mut self) {
        self.entries.clear();
        self.cache.get_mut().clear();
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn lines(&self, idx: usize, width: u16) -> Vec<Line<'static>> {
        let (id, e) = &self.entries[idx];
        if let Some(l) = self.cache.borrow().get(&(id.0, width)) {
            return l.clone();
        }
        let mut header = vec![Span::styled(
            e.header.clone(),
            Style::default().add_modifier(Modifier::BOLD),
        )];
        match &e.state {
            EntryState::Streaming => header.push(" ▍".dim()),
            EntryState::Interrupted => header.push(" [stopped]".dim()),
            EntryState::Failed(why) => header.push(format!(" [failed: {why}]").red()),
            EntryState::Complete => {}
        }
        let mut out = vec![Line::from(header)];
        let content = crate::tui::sanitize_text(&e.content);
        for raw in content.split('\n') {
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
        out.push(Line::from(""));
        self.cache.borrow_mut().insert((id.0, width), out.clone());
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
                return Some(self.entries[i].0);
            }
        }
        None
    }

    pub fn line_range_of(&self, width: u16, id: EntryId) -> Range<usize> {
        let mut acc = 0;
        for i in 0..self.entries.len() {
            let h = self.lines(i, width).len();
            if self.entries[i].0 == id {
                return acc..acc + h;
            }
            acc += h;
        }
        0..0
    }

    pub fn render(&self, area: Rect, buf: &mut Buffer, top: usize, selected: Option<EntryId>) {
        let mut line_no = 0usize;
        let mut y = area.y;
        for i in 0..self.entries.len() {
            for l in self.lines(i, area.width) {
                if line_no >= top && y < area.bottom() {
                    let mut l = l;
                    if selected == Some(self.entries[i].0) {
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

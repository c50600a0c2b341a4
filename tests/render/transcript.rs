//! The cached transcript draws exactly what an uncached render of the same entries draws.
use convo_tui::render::markdown::Document;
use convo_tui::render::style;
use convo_tui::render::transcript::{Entry, EntryId, EntryState, Transcript, shown};
use convo_wire::types::Role;
use proptest::prelude::*;
use proptest::sample::Index;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;

use crate::generate;

const ROWS: u16 = 14;

/// What the pane must show: the uncached lines `[top, top + rows)`, selection patched over the
/// rows of `selected` (its line range computed independently of the transcript's caches).
fn expected(
    t: &Transcript,
    width: u16,
    top: usize,
    rows: u16,
    selected: Option<EntryId>,
) -> Buffer {
    let lines = t.lines_uncached(width);
    let area = Rect::new(0, 0, width, rows);
    let mut buf = Buffer::empty(area);
    for (y, line) in lines.iter().skip(top).take(usize::from(rows)).enumerate() {
        buf.set_line(0, y as u16, line, width);
    }
    let mut start = 0;
    for (id, entry) in t.entries() {
        let end = start + 2 + Document::parse(&shown(entry.role, &entry.content)).height(width);
        if Some(id) == selected {
            for line in start.max(top)..end.min(top + usize::from(rows)) {
                buf.set_style(
                    Rect::new(0, (line - top) as u16, width, 1),
                    style::selected(),
                );
            }
        }
        start = end;
    }
    assert_eq!(start, lines.len());
    buf
}

fn check(
    t: &Transcript,
    width: u16,
    top: &Index,
    selected: Option<EntryId>,
) -> Result<(), TestCaseError> {
    let total = t.lines_uncached(width).len();
    prop_assert_eq!(t.height(width), total, "height at {}", width);
    let top = top.index(total + 1);
    let area = Rect::new(0, 0, width, ROWS);
    let mut buf = Buffer::empty(area);
    t.render(area, &mut buf, top, selected);
    prop_assert_eq!(
        &buf,
        &expected(t, width, top, ROWS, selected),
        "width {} top {}",
        width,
        top
    );
    if let Some(id) = t.entry_at_line(width, top) {
        prop_assert!(t.line_range_of(width, id).contains(&top));
    }
    Ok(())
}

fn role(n: u8) -> Role {
    [Role::User, Role::Assistant, Role::System][usize::from(n % 3)]
}

/// Cut `text` at char boundaries picked by `cuts`.
fn deltas(text: &str, cuts: &[Index]) -> Vec<String> {
    let bounds: Vec<usize> = text
        .char_indices()
        .map(|(i, _)| i)
        .chain([text.len()])
        .collect();
    let mut cuts: Vec<usize> = cuts.iter().map(|c| bounds[c.index(bounds.len())]).collect();
    cuts.sort_unstable();
    cuts.push(text.len());
    let mut start = 0;
    cuts.into_iter()
        .map(|cut| {
            let piece = text[start..cut].to_owned();
            start = cut;
            piece
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(crate::cases(64)))]

    /// Random histories, a streamed reply cut into random deltas, random widths (resizes),
    /// scroll positions and selections: the cached frame equals the uncached one every time.
    #[test]
    fn cached_render_equals_uncached(
        history in prop::collection::vec((any::<u8>(), generate::message()), 0..5),
        reply in generate::message(),
        cuts in prop::collection::vec(any::<Index>(), 0..40),
        frames in prop::collection::vec(
            (prop::option::weighted(0.3, 20u16..=200), any::<Index>(), any::<Option<Index>>()),
            1..80,
        ),
    ) {
        let mut t = Transcript::new();
        for (i, (r, content)) in history.iter().enumerate() {
            t.push(Entry::new(role(*r), content.as_str(), format!("{} · {i}", role(*r))));
        }
        let reply_id = t.push(Entry::streaming(Role::Assistant, "assistant · now"));
        let mut width = 80;
        let mut frames = frames.iter().cycle();
        for delta in deltas(&reply, &cuts) {
            t.append_delta(reply_id, &delta);
            let (w, top, sel) = frames.next().expect("cycle");
            width = w.unwrap_or(width);
            let ids: Vec<EntryId> = t.entries().map(|(id, _)| id).collect();
            let selected = sel.as_ref().map(|s| ids[s.index(ids.len())]);
            check(&t, width, top, selected)?;
        }
        prop_assert_eq!(&t.get(reply_id).expect("reply").content, &reply);
        t.set_state(reply_id, EntryState::Complete);
        for (w, top, _) in frames.take(4) {
            check(&t, w.unwrap_or(width), top, Some(reply_id))?;
        }
    }

    /// Edits in the middle of the history (content replaced, entries removed) keep the caches right.
    #[test]
    fn edits_keep_caches_right(
        history in prop::collection::vec(generate::message(), 1..6),
        replacement in generate::message(),
        which in any::<Index>(),
        width in 20u16..=200,
        top in any::<Index>(),
    ) {
        let mut t = Transcript::new();
        let ids: Vec<EntryId> = history.iter().map(|m| t.push(Entry::new(Role::User, m.as_str(), "user"))).collect();
        check(&t, width, &top, None)?;
        let id = ids[which.index(ids.len())];
        t.set_content(id, replacement);
        check(&t, width, &top, Some(id))?;
        t.set_header(id, "user · edited");
        t.set_state(id, EntryState::Failed("boom\x1b[31m\nnext".into()));
        check(&t, width, &top, Some(id))?;
        t.remove(id);
        check(&t, width, &top, None)?;
        t.append_delta(ids[0], "\n\nmore *text*");
        check(&t, width, &top, None)?;
    }
}

/// A fixed mixed history at every width from 20 to 200, scrolled to several positions,
/// with a reply streamed in small pieces between widths.
#[test]
fn every_width_from_20_to_200() {
    let sample = include_str!("sample.md");
    let mut t = Transcript::new();
    for (i, part) in sample.split("\n\n\n").enumerate() {
        t.push(Entry::new(
            role(i as u8),
            part,
            format!("{} · {i}", role(i as u8)),
        ));
    }
    let reply = t.push(Entry::streaming(Role::Assistant, "assistant"));
    let mut pieces = sample
        .as_bytes()
        .chunks(7)
        .map(|c| String::from_utf8_lossy(c).into_owned());
    for width in 20..=200u16 {
        if let Some(piece) = pieces.next() {
            t.append_delta(reply, &piece);
        }
        let total = t.lines_uncached(width).len();
        for top in [0, total / 3, total.saturating_sub(usize::from(ROWS))] {
            let area = Rect::new(0, 0, width, ROWS);
            let mut buf = Buffer::empty(area);
            t.render(area, &mut buf, top, None);
            assert_eq!(
                buf,
                expected(&t, width, top, ROWS, None),
                "width {width} top {top}"
            );
        }
        assert_eq!(t.height(width), total);
    }
}

#[test]
fn scrolling_past_the_end_draws_nothing() {
    let mut t = Transcript::new();
    t.push(Entry::new(Role::User, "hello", "user"));
    let area = Rect::new(0, 0, 20, 3);
    let mut buf = Buffer::empty(area);
    t.render(area, &mut buf, 3, None);
    assert_eq!(buf, Buffer::empty(area));
    assert_eq!(t.entry_at_line(20, 3), None);
}

//! The hits list of a search across sessions (`/search TEXT`, or the key in the sessions
//! pane): the text typed, the store's answer, the selected hit.

use crate::line_input::LineInput;
use convo_client::local_store::SearchHit;

/// Hits asked of the store per search.
pub const HITS_LIMIT: usize = 200;

/// Where the answer for the text typed stands.
#[derive(Debug, Clone, PartialEq)]
pub enum HitsState {
    /// Nothing to search for yet.
    Empty,
    Searching,
    Done,
    Failed(String),
}

/// The hits list's state.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionSearch {
    pub query: LineInput,
    pub hits: Vec<SearchHit>,
    /// Index into `hits`.
    pub cursor: usize,
    pub state: HitsState,
    /// The number of the last search asked for: answers to earlier ones are dropped.
    pub asked: u64,
    /// Sessions of the target listed without any message in the store (written on another
    /// device): not searched until their histories are read (`read_unsearched`).
    pub unsearched: Vec<String>,
    /// Histories asked for by `read_unsearched` and not answered yet.
    pub reading: usize,
}

impl SessionSearch {
    pub fn new(query: String) -> Self {
        SessionSearch {
            query: LineInput::with_text(&query, usize::MAX),
            hits: Vec::new(),
            cursor: 0,
            state: HitsState::Empty,
            asked: 0,
            unsearched: Vec::new(),
            reading: 0,
        }
    }

    /// The text changed: returns the number of the search to ask for, or `None` when there
    /// is nothing to search for (no word in the text), which empties the list.
    pub fn ask(&mut self) -> Option<u64> {
        self.asked += 1;
        if convo_client::local_store::fts_query(self.query.text()).is_none() {
            self.hits.clear();
            self.cursor = 0;
            self.state = HitsState::Empty;
            return None;
        }
        self.state = HitsState::Searching;
        Some(self.asked)
    }

    /// The store's answer to search `seq` (the hits, and the sessions it could not search);
    /// an answer to an earlier search is dropped.
    pub fn answered(&mut self, seq: u64, result: Result<(Vec<SearchHit>, Vec<String>), String>) {
        if seq != self.asked {
            return;
        }
        match result {
            Ok((hits, unsearched)) => {
                self.hits = hits;
                self.unsearched = unsearched;
                self.cursor = 0;
                self.state = HitsState::Done;
            }
            Err(e) => self.state = HitsState::Failed(e),
        }
    }

    /// The key that reads the sessions not searched: their ids to read (all but `open`, the
    /// session open in the transcript, whose history comes in as it opens), unless a read is
    /// under way or there is none.
    pub fn read_unsearched(&mut self, open: Option<&str>) -> Option<Vec<String>> {
        if self.reading > 0 {
            return None;
        }
        let ids: Vec<String> = self
            .unsearched
            .iter()
            .filter(|id| Some(id.as_str()) != open)
            .cloned()
            .collect();
        if ids.is_empty() {
            return None;
        }
        self.reading = ids.len();
        Some(ids)
    }

    /// One history asked for by `read_unsearched` answered (and, read, queued for the store
    /// before this): true when it was the last, and the search is to be asked again.
    pub fn read_one(&mut self) -> bool {
        if self.reading == 0 {
            return false;
        }
        self.reading -= 1;
        self.reading == 0
    }

    pub fn up(&mut self) {
        self.cursor = self.cursor.saturating_sub(1);
    }

    pub fn down(&mut self) {
        if self.cursor + 1 < self.hits.len() {
            self.cursor += 1;
        }
    }

    pub fn selected(&self) -> Option<&SearchHit> {
        self.hits.get(self.cursor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use convo_client::api::Role;

    fn hit(session: &str) -> SearchHit {
        SearchHit {
            session_id: session.into(),
            session_title: None,
            position: 0,
            message_id: None,
            role: Role::User,
            created_at: chrono::Utc::now(),
            snippet: Vec::new(),
        }
    }

    #[test]
    fn only_the_answer_to_the_last_search_is_kept() {
        let mut s = SessionSearch::new("ru".into());
        let first = s.ask().unwrap();
        s.query.set_text("rust");
        let second = s.ask().unwrap();
        s.answered(
            second,
            Ok((vec![hit("session_b"), hit("session_c")], Vec::new())),
        );
        s.answered(first, Ok((vec![hit("session_a")], Vec::new())));
        assert_eq!(s.hits.len(), 2);
        assert_eq!(s.state, HitsState::Done);
        s.down();
        s.down();
        assert_eq!(s.selected().unwrap().session_id, "session_c");
        s.up();
        s.up();
        assert_eq!(s.cursor, 0);
        s.query.set_text("* -");
        assert_eq!(s.ask(), None);
        assert!(s.hits.is_empty());
        assert_eq!(s.state, HitsState::Empty);
    }

    #[test]
    fn the_sessions_not_searched_are_read_once_and_then_searched_again() {
        let mut s = SessionSearch::new("keeper".into());
        let seq = s.ask().unwrap();
        let unsearched = vec!["session_open".to_string(), "session_other".to_string()];
        s.answered(seq, Ok((Vec::new(), unsearched)));
        // The open session's history comes in as it opens: not asked for here.
        assert_eq!(
            s.read_unsearched(Some("session_open")),
            Some(vec!["session_other".to_string()])
        );
        assert_eq!(s.reading, 1);
        // Asked for already: the key does nothing until the answer.
        assert_eq!(s.read_unsearched(None), None);
        assert!(s.read_one(), "the last answer asks the search again");
        assert!(!s.read_one());
        // Nothing else to read.
        let seq = s.ask().unwrap();
        s.answered(
            seq,
            Ok((vec![hit("session_other")], vec!["session_open".into()])),
        );
        assert_eq!(s.read_unsearched(Some("session_open")), None);
    }
}

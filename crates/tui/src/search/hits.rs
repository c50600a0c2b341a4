//! The hits list of a search across sessions (`/search TEXT`, or the key in the sessions
//! pane): the text typed, the store's answer, the selected hit.

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
    pub query: String,
    pub hits: Vec<SearchHit>,
    /// Index into `hits`.
    pub cursor: usize,
    pub state: HitsState,
    /// The number of the last search asked for: answers to earlier ones are dropped.
    pub asked: u64,
}

impl SessionSearch {
    pub fn new(query: String) -> Self {
        SessionSearch {
            query,
            hits: Vec::new(),
            cursor: 0,
            state: HitsState::Empty,
            asked: 0,
        }
    }

    /// The text changed: returns the number of the search to ask for, or `None` when there
    /// is nothing to search for (no word in the text), which empties the list.
    pub fn ask(&mut self) -> Option<u64> {
        self.asked += 1;
        if convo_client::local_store::fts_query(&self.query).is_none() {
            self.hits.clear();
            self.cursor = 0;
            self.state = HitsState::Empty;
            return None;
        }
        self.state = HitsState::Searching;
        Some(self.asked)
    }

    /// The store's answer to search `seq`; an answer to an earlier search is dropped.
    pub fn answered(&mut self, seq: u64, result: Result<Vec<SearchHit>, String>) {
        if seq != self.asked {
            return;
        }
        match result {
            Ok(hits) => {
                self.hits = hits;
                self.cursor = 0;
                self.state = HitsState::Done;
            }
            Err(e) => self.state = HitsState::Failed(e),
        }
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
        s.query = "rust".into();
        let second = s.ask().unwrap();
        s.answered(second, Ok(vec![hit("session_b"), hit("session_c")]));
        s.answered(first, Ok(vec![hit("session_a")]));
        assert_eq!(s.hits.len(), 2);
        assert_eq!(s.state, HitsState::Done);
        s.down();
        s.down();
        assert_eq!(s.selected().unwrap().session_id, "session_c");
        s.up();
        s.up();
        assert_eq!(s.cursor, 0);
        s.query = "* -".into();
        assert_eq!(s.ask(), None);
        assert!(s.hits.is_empty());
        assert_eq!(s.state, HitsState::Empty);
    }
}

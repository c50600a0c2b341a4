//! Search: in the open transcript (the search bar, [`TranscriptSearch`]) and across the
//! sessions of the local store (the hits list, [`SessionSearch`]). Plain state; `App`
//! changes it in `update` (`app/search.rs`) and the views draw it (`view/search.rs`).

mod hits;
mod transcript;

pub use hits::{HITS_LIMIT, HitsState, SessionSearch};
pub use transcript::{Match, TranscriptSearch, fold};

//! Full-text search over every session's annotation units, with filters.
//!
//! A tantivy index, kept beside the data directory (`<data-dir>/search-index/`; in memory
//! without one), holds one document per unit (its text, session, framework, type, actor,
//! tools, whether a tool call failed, whether it delegates, its time and place in the
//! session) and one marker per session saying what the session was indexed from. The
//! store tells the index of every upload, deletion and reload; an indexer task brings the
//! index in line in the background, and at start indexes what is missing or stale without
//! holding the start up. A search is a tantivy query: BM25 on the text, filters as term,
//! set and range queries, a page with its total and snippets; or every matching unit.
//!
//! - [`service`]: [`Search`], the handle the application holds, and [`SearchConfig`];
//! - [`index`]: the index on disk or in memory, made anew when its schema changed;
//! - [`schema`]: the fields and the documents;
//! - [`document`]: what is indexed of one unit;
//! - [`markers`]: what each session was indexed from, to find the stale ones;
//! - [`updates`]: a session indexed again, or removed;
//! - [`indexer`]: the background task that follows the store;
//! - [`progress`]: how far the index is behind;
//! - [`query`]: a search as asked, and the tantivy query it becomes ([`unit_set`]: the
//!   label filter's);
//! - [`results`]: a page of results, ranked, with snippets ([`snippet`]);
//! - [`keys`]: every unit a search matches, in a fixed order;
//! - [`error`]: why a search or an update failed.

pub mod document;
pub mod error;
pub mod index;
pub mod indexer;
pub mod keys;
pub mod markers;
pub mod progress;
pub mod query;
pub mod results;
pub mod schema;
pub mod service;
pub mod snippet;
pub mod unit_set;
pub mod updates;

pub use error::SearchError;
pub use keys::UnitKey;
pub use progress::IndexState;
pub use query::{LabelFilter, SearchQuery};
pub use results::{Hit, SearchPage};
pub use service::{Search, SearchConfig};

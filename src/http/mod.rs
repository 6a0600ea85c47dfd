//! What the API and the labeling page answer with alike: conditional requests against an
//! ETag ([`etag`]) and the JSON error body ([`error_body`]). Neither depends on the other;
//! both depend on this.

pub mod error_body;
pub mod etag;

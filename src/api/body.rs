//! Sending a rendered [`Body`] without joining its chunks, holding its share of the render
//! budget until it is sent.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Frame, SizeHint};

use crate::core::views::Body;
use crate::store::bodies::Served;
use crate::store::budget::BudgetPermit;

/// An HTTP body that yields a rendered body's chunks in order, with its exact length known
/// up front (so the response carries `Content-Length`).
#[derive(Debug)]
pub struct ChunkedBody {
    chunks: Arc<[Bytes]>,
    next: usize,
    remaining: u64,
    /// The render budget the body holds: given back when the body is sent or dropped.
    _permit: Option<BudgetPermit>,
}

impl From<Body> for ChunkedBody {
    fn from(body: Body) -> ChunkedBody {
        ChunkedBody {
            remaining: body.len() as u64,
            chunks: body.into_chunks(),
            next: 0,
            _permit: None,
        }
    }
}

impl ChunkedBody {
    /// `body`, holding `permit` until it is sent or dropped.
    pub fn holding(body: Body, permit: Option<BudgetPermit>) -> ChunkedBody {
        ChunkedBody {
            _permit: permit,
            ..ChunkedBody::from(body)
        }
    }
}

impl From<Served> for axum::body::Body {
    fn from(served: Served) -> axum::body::Body {
        match served.permit {
            None => served.body.into(),
            permit => axum::body::Body::new(ChunkedBody::holding(served.body, permit)),
        }
    }
}

impl From<Body> for axum::body::Body {
    fn from(body: Body) -> axum::body::Body {
        match body.chunks() {
            [] => axum::body::Body::empty(),
            [one] => axum::body::Body::from(one.clone()),
            _ => axum::body::Body::new(ChunkedBody::from(body)),
        }
    }
}

impl http_body::Body for ChunkedBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let Some(chunk) = self.chunks.get(self.next).cloned() else {
            return Poll::Ready(None);
        };
        self.next += 1;
        self.remaining -= chunk.len() as u64;
        Poll::Ready(Some(Ok(Frame::data(chunk))))
    }

    fn is_end_stream(&self) -> bool {
        self.next >= self.chunks.len()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.remaining)
    }
}

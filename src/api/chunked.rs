//! Sending a rendered [`Body`] without joining its chunks, holding its share of the render
//! budget until it is sent, and taking turns with the other connections.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Frame, SizeHint};

use crate::core::views::Body;
use crate::store::bodies::Served;
use crate::store::budget::BudgetPermit;

/// Largest frame handed to the connection at once.
const MAX_FRAME: usize = 64 * 1024;

/// Chunks shorter than this are copied into one frame with the short ones after them: a
/// body that shares long texts is made of many short chunks, and a frame each would cost
/// the connection a write each.
const SHORT_CHUNK: usize = 4 * 1024;

/// Bytes a body hands over before it lets other tasks run.
const BYTES_PER_TURN: usize = 64 * 1024;

/// An HTTP body that yields a rendered body's chunks in order, with its exact length known
/// up front (so the response carries `Content-Length`).
///
/// A connection task writes for as long as its socket takes data and its body has more: on
/// loopback or a fast network that is megabytes per turn, and with many large bodies in
/// flight every other request (a `/healthz` probe) waits behind all of them. So the body
/// hands over at most `BYTES_PER_TURN` per turn, then yields (`Pending`, woken at once)
/// and its task goes to the back of the run queue.
#[derive(Debug)]
pub struct ChunkedBody {
    chunks: Arc<[Bytes]>,
    next: usize,
    /// The unsent rest of the chunk being sent.
    current: Bytes,
    remaining: u64,
    sent_this_turn: usize,
    /// The render budget the body holds: given back when the body is sent or dropped.
    _permit: Option<BudgetPermit>,
}

impl From<Body> for ChunkedBody {
    fn from(body: Body) -> ChunkedBody {
        ChunkedBody {
            remaining: body.len() as u64,
            chunks: body.into_chunks(),
            next: 0,
            current: Bytes::new(),
            sent_this_turn: 0,
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

impl ChunkedBody {
    /// The current chunk (a short one) and the short chunks after it, copied into one
    /// frame of at most [`MAX_FRAME`] bytes.
    fn gather_short_chunks(&mut self) -> Bytes {
        let following = self.chunks[self.next..]
            .iter()
            .scan(self.current.len(), |len, chunk| {
                *len += chunk.len();
                (chunk.len() < SHORT_CHUNK && *len <= MAX_FRAME).then_some(chunk)
            })
            .count();
        if following == 0 {
            return std::mem::take(&mut self.current);
        }
        let chunks = &self.chunks[self.next..self.next + following];
        let len = self.current.len() + chunks.iter().map(Bytes::len).sum::<usize>();
        let mut frame = bytes::BytesMut::with_capacity(len);
        frame.extend_from_slice(&self.current);
        for chunk in chunks {
            frame.extend_from_slice(chunk);
        }
        self.current = Bytes::new();
        self.next += following;
        frame.freeze()
    }
}

impl From<Served> for axum::body::Body {
    fn from(served: Served) -> axum::body::Body {
        axum::body::Body::new(ChunkedBody::holding(served.body, served.permit))
    }
}

/// A rendered body as an HTTP body: empty, one frame, or sent a frame at a time.
pub fn http_body(body: Body) -> axum::body::Body {
    match body.chunks() {
        [] => axum::body::Body::empty(),
        [one] if one.len() <= MAX_FRAME => axum::body::Body::from(one.clone()),
        _ => axum::body::Body::new(ChunkedBody::from(body)),
    }
}

impl http_body::Body for ChunkedBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if self.current.is_empty() {
            let Some(chunk) = self.chunks.get(self.next).cloned() else {
                return Poll::Ready(None);
            };
            self.next += 1;
            self.current = chunk;
        }
        if self.sent_this_turn >= BYTES_PER_TURN {
            self.sent_this_turn = 0;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        let frame = if self.current.len() < SHORT_CHUNK {
            self.gather_short_chunks()
        } else {
            let take = self.current.len().min(MAX_FRAME);
            self.current.split_to(take)
        };
        self.sent_this_turn += frame.len();
        self.remaining -= frame.len() as u64;
        Poll::Ready(Some(Ok(Frame::data(frame))))
    }

    fn is_end_stream(&self) -> bool {
        self.remaining == 0
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.remaining)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Waker;

    /// Polls `body` to its end; returns what it sent, how many times it yielded and in how
    /// many frames.
    fn drain_counting_frames(mut body: ChunkedBody) -> (Vec<u8>, usize, usize) {
        let mut cx = Context::from_waker(Waker::noop());
        let (mut sent, mut yields, mut frames) = (Vec::new(), 0, 0);
        loop {
            match http_body::Body::poll_frame(Pin::new(&mut body), &mut cx) {
                Poll::Ready(Some(Ok(frame))) => {
                    let data = frame.into_data().expect("data frames only");
                    assert!(data.len() <= MAX_FRAME);
                    sent.extend_from_slice(&data);
                    frames += 1;
                }
                Poll::Ready(None) => break,
                Poll::Pending => yields += 1,
            }
        }
        assert!(http_body::Body::is_end_stream(&body));
        (sent, yields, frames)
    }

    /// Polls `body` to its end; returns what it sent and how many times it yielded.
    fn drain(body: ChunkedBody) -> (Vec<u8>, usize) {
        let (sent, yields, _) = drain_counting_frames(body);
        (sent, yields)
    }

    #[test]
    fn a_large_body_is_sent_whole_in_turns() {
        let mut w = crate::core::views::ChunkWriter::new();
        let expected: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        std::io::Write::write_all(&mut w, &expected).unwrap();
        let body = w.finish();
        let (sent, yields) = drain(ChunkedBody::from(body));
        assert!(sent == expected);
        // A turn hands over at least BYTES_PER_TURN, and less than one frame more.
        assert!(yields < expected.len().div_ceil(BYTES_PER_TURN), "{yields}");
        assert!(
            yields >= expected.len() / (BYTES_PER_TURN + MAX_FRAME),
            "{yields}"
        );
    }

    #[test]
    fn short_chunks_are_sent_together_and_whole() {
        let mut w = crate::core::views::ChunkWriter::new();
        let mut expected = Vec::new();
        // Short parts, and a long one now and then.
        let size = |i: usize| {
            if i % 100 == 99 {
                100_000
            } else {
                1 + (i * 37) % 300
            }
        };
        let parts: Vec<Vec<u8>> = (0..2_000).map(|i| vec![(i % 251) as u8; size(i)]).collect();
        for (i, part) in parts.iter().enumerate() {
            // Every other part appended as a body of its own: a chunk of its own.
            if i % 2 == 0 {
                w.append(Body::from(part.clone()));
            } else {
                std::io::Write::write_all(&mut w, part).unwrap();
            }
            expected.extend_from_slice(part);
        }
        let body = w.finish();
        let chunks = body.chunks().len();
        let (sent, _, frames) = drain_counting_frames(ChunkedBody::from(body));
        assert!(sent == expected);
        assert!(frames < chunks / 2, "{frames} frames for {chunks} chunks");
    }

    #[test]
    fn empty_and_small_bodies_are_sent_without_yielding() {
        assert_eq!(drain(ChunkedBody::from(Body::default())), (Vec::new(), 0));
        let (sent, yields) = drain(ChunkedBody::from(Body::from(b"{}".to_vec())));
        assert_eq!((sent.as_slice(), yields), (&b"{}"[..], 0));
    }
}

//! A rendered body: JSON bytes held as a list of chunks.
//!
//! Bodies of large sessions run to hundreds of MB. Grown as one `Vec`, a body is copied at
//! every doubling and touches about twice its size in fresh memory, which on a virtual
//! machine costs more than the serialisation itself. Written into chunks, it touches its own
//! size once, and the chunks go to the socket as they are.

use std::io;
use std::sync::Arc;

use bytes::Bytes;

use crate::json::literals::{pieces_of, Piece, MIN_SHARED_TEXT};

/// Size of the first chunk: most bodies (a session's info, a small session's views) fit.
const FIRST_CHUNK: usize = 16 * 1024;

/// Chunks grow by doubling up to this size.
const MAX_CHUNK: usize = 1024 * 1024;

/// A rendered body. Cloning it is cheap (the chunks are shared).
#[derive(Debug, Clone, Default)]
pub struct Body {
    chunks: Arc<[Bytes]>,
    len: usize,
    /// Bytes of the body that are texts of the session's input ([`crate::json::literals`]),
    /// held by the session rather than by the body.
    shared: usize,
}

impl Body {
    /// The chunks, in order.
    pub fn chunks(&self) -> &[Bytes] {
        &self.chunks
    }

    /// The chunks, shared.
    pub fn into_chunks(self) -> Arc<[Bytes]> {
        self.chunks
    }

    /// Total length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for an empty body.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bytes of the body that are long texts of the session's input, kept by reference
    /// ([`crate::json::literals`]): the memory the body holds itself is `len() - shared_len()`.
    pub fn shared_len(&self) -> usize {
        self.shared
    }

    /// The memory the body holds itself: its own bytes (not the input's texts) and the
    /// handles of its chunks.
    pub fn held_bytes(&self) -> usize {
        self.len - self.shared + std::mem::size_of_val(&*self.chunks)
    }

    /// The bytes of `range`, as slices of the chunks that hold them (nothing is copied).
    pub fn slices(&self, range: std::ops::Range<usize>) -> impl Iterator<Item = Bytes> + '_ {
        let mut start_of_chunk = 0;
        self.chunks.iter().filter_map(move |chunk| {
            let (from, to) = (start_of_chunk, start_of_chunk + chunk.len());
            start_of_chunk = to;
            let (a, b) = (range.start.max(from), range.end.min(to));
            (a < b).then(|| chunk.slice(a - from..b - from))
        })
    }

    /// The body as one contiguous buffer (copies unless it is a single chunk).
    pub fn to_bytes(&self) -> Bytes {
        match &*self.chunks {
            [] => Bytes::new(),
            [one] => one.clone(),
            many => {
                let mut all = Vec::with_capacity(self.len);
                for c in many {
                    all.extend_from_slice(c);
                }
                Bytes::from(all)
            }
        }
    }
}

impl From<Bytes> for Body {
    fn from(bytes: Bytes) -> Body {
        Body {
            len: bytes.len(),
            chunks: Arc::from([bytes]),
            shared: 0,
        }
    }
}

impl From<Vec<u8>> for Body {
    fn from(v: Vec<u8>) -> Body {
        Body::from(Bytes::from(v))
    }
}

/// An [`io::Write`] that fills chunks of growing size and never moves what it wrote. A
/// long text of the input ([`crate::json::literals`]) is kept as a reference to the input.
#[derive(Debug)]
pub struct ChunkWriter {
    done: Vec<Bytes>,
    current: Vec<u8>,
    /// Literals kept between the bytes of `current`: each with where it goes in `current`.
    literals: Vec<(usize, Bytes)>,
    len: usize,
    shared: usize,
}

impl Default for ChunkWriter {
    fn default() -> Self {
        ChunkWriter {
            done: Vec::new(),
            current: Vec::with_capacity(FIRST_CHUNK),
            literals: Vec::new(),
            len: 0,
            shared: 0,
        }
    }
}

impl ChunkWriter {
    /// An empty writer.
    pub fn new() -> ChunkWriter {
        ChunkWriter::default()
    }

    /// Bytes written so far.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when nothing was written yet.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Appends a rendered body after what was written, without copying it.
    pub fn append(&mut self, body: Body) {
        if body.is_empty() {
            return;
        }
        self.seal_current();
        self.len += body.len();
        self.shared += body.shared;
        self.done.extend(body.chunks().iter().cloned());
    }

    /// Appends the bytes of `range` of `body` after what was written, without copying them
    /// (the chunks are shared).
    pub fn append_range(&mut self, body: &Body, range: std::ops::Range<usize>) {
        if range.is_empty() {
            return;
        }
        self.seal_current();
        for slice in body.slices(range) {
            self.len += slice.len();
            self.done.push(slice);
        }
    }

    /// Ends the current chunk (giving back its spare capacity when it holds less than half
    /// of it), so that shared chunks can follow it.
    fn seal_current(&mut self) {
        if !self.current.is_empty() || !self.literals.is_empty() {
            self.move_current(FIRST_CHUNK);
        }
    }

    /// The body written so far. The last chunk gives back its spare capacity when it holds
    /// less than half of it.
    pub fn finish(mut self) -> Body {
        self.move_current(0);
        Body {
            chunks: Arc::from(self.done),
            len: self.len,
            shared: self.shared,
        }
    }

    /// Moves the current chunk to the done ones, with the literals kept between its bytes,
    /// and starts a chunk of `capacity`. A chunk less than half full gives back the rest.
    fn move_current(&mut self, capacity: usize) {
        let mut own = std::mem::replace(&mut self.current, Vec::with_capacity(capacity));
        if own.len() < own.capacity() / 2 {
            own.shrink_to_fit();
        }
        if self.literals.is_empty() {
            if !own.is_empty() {
                self.done.push(Bytes::from(own));
            }
            return;
        }
        let own = Bytes::from(own);
        let mut from = 0;
        for (at, literal) in self.literals.drain(..) {
            if at > from {
                self.done.push(own.slice(from..at));
            }
            self.done.push(literal);
            from = at;
        }
        if own.len() > from {
            self.done.push(own.slice(from..));
        }
    }

    /// Keeps the shared pieces of `buf` by reference (and copies the rest) when it is the
    /// text a [`crate::json::literals::Text`] is writing; false when it is not one.
    #[inline(never)]
    fn keep_literal(&mut self, buf: &[u8]) -> bool {
        let Some(pieces) = pieces_of(buf) else {
            return false;
        };
        for piece in pieces {
            match piece {
                Piece::Own(range) => self.write_own(&buf[range]),
                Piece::Shared(literal) => {
                    self.len += literal.len();
                    self.shared += literal.len();
                    self.literals.push((self.current.len(), literal));
                }
            }
        }
        true
    }

    /// Copies `buf` into the current chunk.
    #[inline]
    fn write_own(&mut self, buf: &[u8]) {
        self.len += buf.len();
        if buf.len() <= self.current.capacity() - self.current.len() {
            self.current.extend_from_slice(buf);
        } else {
            self.write_spilling(buf);
        }
    }

    /// Writes what does not fit in the current chunk.
    #[cold]
    fn write_spilling(&mut self, mut buf: &[u8]) {
        while !buf.is_empty() {
            let room = self.current.capacity() - self.current.len();
            if room == 0 {
                let next = (self.current.capacity() * 2).clamp(FIRST_CHUNK, MAX_CHUNK);
                self.move_current(next);
                continue;
            }
            let take = room.min(buf.len());
            self.current.extend_from_slice(&buf[..take]);
            buf = &buf[take..];
        }
    }
}

impl io::Write for ChunkWriter {
    // serde_json writes every quote, comma and key separately: the common case, a piece
    // that fits, must stay a bounds check and a copy.
    #[inline]
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if buf.len() < MIN_SHARED_TEXT || !self.keep_literal(buf) {
            self.write_own(buf);
        }
        Ok(buf.len())
    }

    #[inline]
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.write(buf).map(|_| ())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Where a body is written in parallel parts: memory ([`ChunkWriter`], whose parts are
/// kept as they are, all rendered in one pass) or a stream ([`StreamWriter`], which has a
/// window of parts rendered while it writes the window before, and lets them go).
pub trait BodyWriter: io::Write {
    /// Bytes written so far.
    fn written(&self) -> usize;

    /// Appends a part rendered on its own.
    fn append_part(&mut self, part: Body) -> io::Result<()>;

    /// How many segments to render before their parts are appended: all of them by
    /// default (one parallel pass, no waiting between windows).
    fn segments_at_once(&self) -> usize {
        usize::MAX
    }
}

impl BodyWriter for ChunkWriter {
    fn written(&self) -> usize {
        self.len()
    }

    fn append_part(&mut self, part: Body) -> io::Result<()> {
        self.append(part);
        Ok(())
    }
}

/// A [`BodyWriter`] that passes everything on to `inner` (a file, standard output): a body
/// rendered in parallel through it holds only the parts of two windows in memory: the one
/// being written and the next, being rendered.
#[derive(Debug)]
pub struct StreamWriter<W> {
    inner: W,
    written: usize,
}

impl<W: io::Write> StreamWriter<W> {
    /// A writer onto `inner`.
    pub fn new(inner: W) -> Self {
        StreamWriter { inner, written: 0 }
    }
}

impl<W: io::Write> io::Write for StreamWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.written += n;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

impl<W: io::Write> BodyWriter for StreamWriter<W> {
    fn written(&self) -> usize {
        self.written
    }

    /// Hands the part's chunks to `inner` in vectored writes: a buffered writer passes a
    /// part larger than its buffer straight on instead of copying it through the buffer.
    fn append_part(&mut self, part: Body) -> io::Result<()> {
        let mut slices: Vec<io::IoSlice<'_>> = part.chunks().iter().map(|c| io::IoSlice::new(c)).collect();
        let mut rest = &mut slices[..];
        while !rest.is_empty() {
            match self.inner.write_vectored(rest) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    self.written += n;
                    io::IoSlice::advance_slices(&mut rest, n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// A window of `SEGMENTS_PER_THREAD` segments per thread of the pool: the writer holds
    /// two at once.
    fn segments_at_once(&self) -> usize {
        SEGMENTS_PER_THREAD * rayon::current_num_threads().max(1)
    }
}

/// Items rendered per parallel task by [`write_elements`].
const ITEMS_PER_SEGMENT: usize = 512;

/// Segments of a [`StreamWriter`]'s window, per thread of the pool: the parts of two windows
/// are what it holds in memory.
const SEGMENTS_PER_THREAD: usize = 4;

/// Writes the elements of a JSON array (without its brackets): `item(i)` for `i` in
/// `0..count`, the `None`s left out, separated by commas. Segments of items are serialised
/// in parallel, each into its own chunks, and appended in order: the bytes are those of a
/// sequential write.
pub fn write_elements<T, F>(out: &mut impl BodyWriter, count: usize, item: F) -> io::Result<()>
where
    T: serde::Serialize,
    F: Fn(usize) -> Option<T> + Sync,
{
    write_elements_indexed(out, count, item).map(|_| ())
}

/// [`write_elements`], returning where each written element ends in `out` (an offset from
/// the start of `out`; the `None`s have no entry). An element starts right after the end of
/// the one before and its comma.
///
/// A writer that takes windows of segments ([`StreamWriter`]) gets them pipelined: the
/// pool renders the next window while this thread writes the one before, so that neither
/// the writing nor the rendering waits for the other.
pub fn write_elements_indexed<T, F>(
    out: &mut impl BodyWriter,
    count: usize,
    item: F,
) -> io::Result<Vec<usize>>
where
    T: serde::Serialize,
    F: Fn(usize) -> Option<T> + Sync,
{
    let segments = count.div_ceil(ITEMS_PER_SEGMENT);
    let window = out.segments_at_once().max(1);
    let mut windows = (0..segments)
        .step_by(window)
        .map(|first| first..first.saturating_add(window).min(segments));
    let mut all_ends = Vec::new();
    let mut rendered = windows.next().map(|w| render_window(w, count, &item));
    while let Some(parts) = rendered.take() {
        let next = windows.next();
        let mut written = Ok(());
        rayon::in_place_scope(|scope| {
            if let Some(next) = next {
                let (item, slot) = (&item, &mut rendered);
                scope.spawn(move |_| *slot = Some(render_window(next, count, item)));
            }
            written = append_segments(out, parts, &mut all_ends);
        });
        written?;
    }
    Ok(all_ends)
}

/// The segments of `window`, rendered in parallel, in order.
fn render_window<T, F>(window: std::ops::Range<usize>, count: usize, item: &F) -> Vec<(Body, Vec<usize>)>
where
    T: serde::Serialize,
    F: Fn(usize) -> Option<T> + Sync,
{
    use rayon::prelude::*;

    window
        .into_par_iter()
        .map(|s| render_segment(s, count, item))
        .collect()
}

/// Appends rendered segments to `out`, separated by commas, and adds where each of their
/// elements ends in `out` to `all_ends`.
fn append_segments(
    out: &mut impl BodyWriter,
    segments: Vec<(Body, Vec<usize>)>,
    all_ends: &mut Vec<usize>,
) -> io::Result<()> {
    for (segment, ends) in segments.into_iter().filter(|(s, _)| !s.is_empty()) {
        if !all_ends.is_empty() {
            out.write_all(b",")?;
        }
        let base = out.written();
        out.append_part(segment)?;
        all_ends.extend(ends.into_iter().map(|e| base + e));
    }
    Ok(())
}

/// Segment `s` of the elements: its bytes and where each element ends in them.
fn render_segment<T, F>(s: usize, count: usize, item: &F) -> (Body, Vec<usize>)
where
    T: serde::Serialize,
    F: Fn(usize) -> Option<T>,
{
    let mut w = ChunkWriter::new();
    let mut ends = Vec::new();
    let end = ((s + 1) * ITEMS_PER_SEGMENT).min(count);
    for value in (s * ITEMS_PER_SEGMENT..end).filter_map(item) {
        if !ends.is_empty() {
            io::Write::write_all(&mut w, b",").expect("writing into memory cannot fail");
        }
        // Writing into memory cannot fail; the views' types always serialise.
        let _ = serde_json::to_writer(&mut w, &value);
        ends.push(w.len());
    }
    (w.finish(), ends)
}

/// A writer that passes on the members of one serialised JSON object, dropping its opening
/// brace: serialising a struct through it continues an object already open (its closing
/// brace closes that object).
#[derive(Debug)]
pub struct ObjectMembers<'w, W> {
    out: &'w mut W,
    opened: bool,
}

impl<'w, W: io::Write> ObjectMembers<'w, W> {
    /// Members written after what `out` holds.
    pub fn new(out: &'w mut W) -> Self {
        ObjectMembers { out, opened: false }
    }
}

impl<W: io::Write> io::Write for ObjectMembers<'_, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut rest = buf;
        if !self.opened {
            match rest.split_first() {
                Some((b'{', tail)) => rest = tail,
                Some(_) => return Err(io::Error::other("expected a JSON object")),
                None => return Ok(0),
            }
            self.opened = true;
        }
        io::Write::write_all(self.out, rest)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use crate::views::body::*;

    #[test]
    fn chunks_hold_exactly_what_was_written_in_order() {
        let mut w = ChunkWriter::new();
        let mut expected = Vec::new();
        for i in 0..50_000u32 {
            let piece = format!("{i},");
            w.write_all(piece.as_bytes()).unwrap();
            expected.extend_from_slice(piece.as_bytes());
        }
        let big = vec![b'x'; 3 * MAX_CHUNK + 17];
        w.write_all(&big).unwrap();
        expected.extend_from_slice(&big);
        let body = w.finish();
        assert_eq!(body.len(), expected.len());
        assert_eq!(body.to_bytes(), expected);
        assert!(body.chunks().len() > 3);
        assert!(body
            .chunks()
            .iter()
            .all(|c| !c.is_empty() && c.len() <= MAX_CHUNK));
    }

    #[test]
    fn parallel_elements_are_those_of_a_sequential_write() {
        for count in [0, 1, 5, ITEMS_PER_SEGMENT, 3 * ITEMS_PER_SEGMENT + 7] {
            let keep = |i: usize| (i % 3 != 1).then(|| format!("item {i}"));
            let mut w = ChunkWriter::new();
            w.write_all(b"[").unwrap();
            write_elements(&mut w, count, keep).unwrap();
            w.write_all(b"]").unwrap();
            let expected: Vec<String> = (0..count).filter_map(keep).collect();
            assert_eq!(
                w.finish().to_bytes(),
                serde_json::to_vec(&expected).unwrap(),
                "{count} items"
            );
        }
    }

    #[test]
    fn element_ends_mark_each_element_and_ranges_slice_without_copying() {
        let count = 3 * ITEMS_PER_SEGMENT + 7;
        let keep = |i: usize| (i % 5 != 2).then(|| format!("item {i}"));
        let mut w = ChunkWriter::new();
        w.write_all(b"[").unwrap();
        let ends = write_elements_indexed(&mut w, count, keep).unwrap();
        w.write_all(b"]").unwrap();
        let body = w.finish();
        let all = body.to_bytes();
        let expected: Vec<String> = (0..count).filter_map(keep).collect();
        assert_eq!(ends.len(), expected.len());
        let mut start = 1;
        for (end, value) in ends.iter().zip(&expected) {
            assert_eq!(&all[start..*end], serde_json::to_vec(value).unwrap());
            start = end + 1;
        }
        // A range across segments and chunks, appended after fresh bytes.
        let (a, b) = (ends[10] + 1, ends[expected.len() - 3]);
        let mut out = ChunkWriter::new();
        out.write_all(b"<").unwrap();
        out.append_range(&body, a..b);
        out.write_all(b">").unwrap();
        let cut = out.finish();
        assert_eq!(&cut.to_bytes()[1..cut.len() - 1], &all[a..b]);
        assert_eq!(cut.len(), b - a + 2);
        let shared = cut.chunks()[1].as_ptr();
        assert!(body.chunks().iter().any(|c| c.as_ptr_range().contains(&shared)));
    }

    #[test]
    fn a_stream_gets_windows_in_order_with_their_element_ends() {
        let window = SEGMENTS_PER_THREAD * rayon::current_num_threads().max(1);
        let count = 3 * window * ITEMS_PER_SEGMENT + 11;
        let keep = |i: usize| (i % 7 != 3).then(|| format!("item {i}"));
        let mut streamed = Vec::new();
        let mut out = StreamWriter::new(&mut streamed);
        out.write_all(b"[").unwrap();
        let ends = write_elements_indexed(&mut out, count, keep).unwrap();
        out.write_all(b"]").unwrap();
        let expected: Vec<String> = (0..count).filter_map(keep).collect();
        assert_eq!(streamed, serde_json::to_vec(&expected).unwrap());
        let mut start = 1;
        for (end, value) in ends.iter().zip(&expected) {
            assert_eq!(&streamed[start..*end], serde_json::to_vec(value).unwrap());
            start = end + 1;
        }
        assert_eq!(ends.len(), expected.len());
    }

    /// A stream that takes a few bytes per write and is interrupted now and then still
    /// gets every byte of the parts, in order.
    #[test]
    fn a_stream_taking_a_few_bytes_at_a_time_gets_every_part_whole() {
        struct Trickle {
            got: Vec<u8>,
            calls: usize,
        }
        impl Write for Trickle {
            fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
                self.calls += 1;
                if self.calls.is_multiple_of(3) {
                    return Err(io::ErrorKind::Interrupted.into());
                }
                let n = buf.len().min(7);
                self.got.extend_from_slice(&buf[..n]);
                Ok(n)
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let mut part = ChunkWriter::new();
        let mut expected = Vec::new();
        for i in 0..5_000u32 {
            let piece = format!("{i};");
            part.write_all(piece.as_bytes()).unwrap();
            expected.extend_from_slice(piece.as_bytes());
        }
        let part = part.finish();
        let mut sink = Trickle {
            got: Vec::new(),
            calls: 0,
        };
        let mut out = StreamWriter::new(&mut sink);
        out.append_part(part.clone()).unwrap();
        out.append_part(part).unwrap();
        assert_eq!(out.written(), 2 * expected.len());
        expected.extend_from_within(..);
        assert_eq!(sink.got, expected);
    }

    /// A stream that fails partway: the error comes back once the window being rendered
    /// beside the write is done, and nothing after it is written.
    #[test]
    fn a_failing_stream_stops_the_windows_with_its_error() {
        struct FailsAfter(usize);
        impl Write for FailsAfter {
            fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
                if buf.len() > self.0 {
                    return Err(io::Error::other("disk full"));
                }
                self.0 -= buf.len();
                Ok(buf.len())
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let count = 4 * SEGMENTS_PER_THREAD * rayon::current_num_threads().max(1) * ITEMS_PER_SEGMENT;
        let mut sink = FailsAfter(10_000);
        let mut out = StreamWriter::new(&mut sink);
        let error = write_elements_indexed(&mut out, count, Some).unwrap_err();
        assert_eq!(error.to_string(), "disk full");
        assert!(out.written() <= 10_000);
    }

    #[test]
    fn object_members_continue_an_open_object() {
        #[derive(serde::Serialize)]
        struct Rest {
            b: u8,
            c: &'static str,
        }
        let mut w = ChunkWriter::new();
        w.write_all(br#"{"a":1,"#).unwrap();
        serde_json::to_writer(ObjectMembers::new(&mut w), &Rest { b: 2, c: "x" }).unwrap();
        assert_eq!(&w.finish().to_bytes()[..], br#"{"a":1,"b":2,"c":"x"}"#);
    }

    #[test]
    fn a_small_body_is_one_chunk() {
        let mut w = ChunkWriter::new();
        w.write_all(b"{}").unwrap();
        let body = w.finish();
        assert_eq!(body.chunks().len(), 1);
        assert_eq!(&body.to_bytes()[..], b"{}");
    }

    #[test]
    fn an_empty_body_has_no_chunks() {
        let body = ChunkWriter::new().finish();
        assert!(body.is_empty());
        assert!(body.chunks().is_empty());
        assert!(body.to_bytes().is_empty());
    }
}

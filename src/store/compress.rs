//! Compressed variants of rendered bodies (gzip, brotli).
//!
//! Compressing a body of tens of MB takes a second or more of CPU. Done by a compression
//! layer while the body streams out, that second is spent on an async worker, and every
//! other request on that worker waits. Here a body is compressed on the CPU pool, once per
//! kept body and encoding (the variant is kept beside it), or once per request for bodies
//! that are not kept (bodies cut at a step).

use std::io::{self, Write};

use crate::core::views::{Body, ChunkWriter};

/// Bodies smaller than this are sent as they are: compressing saves little.
pub const MIN_COMPRESSED_BYTES: usize = 1024;

/// A content coding of a response body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Encoding {
    /// The body as rendered.
    Identity,
    /// `gzip`.
    Gzip,
    /// `br`.
    Brotli,
}

impl Encoding {
    /// The `Content-Encoding` token, `None` for identity.
    pub fn token(self) -> Option<&'static str> {
        match self {
            Encoding::Identity => None,
            Encoding::Gzip => Some("gzip"),
            Encoding::Brotli => Some("br"),
        }
    }
}

/// How much CPU a compression may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effort {
    /// A variant that is kept and sent many times: gzip level 4, brotli quality 5 (18% and
    /// 4% of a workflow body, at 55 and 40 MB/s on the development VM; gzip's level 6 takes
    /// twice as long for 18% too).
    Kept,
    /// A body compressed for one request: gzip level 1, brotli quality 1 (26% and 17%, about
    /// three times faster).
    OneOff,
}

/// Brotli's window: 4 MiB, as browsers expect.
const BROTLI_WINDOW_BITS: i32 = 22;

/// Size of brotli's internal buffer.
const BROTLI_BUFFER: usize = 64 * 1024;

/// `body` compressed with `encoding` (blocking: run it on the CPU pool). Identity gives the
/// body back.
pub fn compress(body: &Body, encoding: Encoding, effort: Effort) -> io::Result<Body> {
    let out = ChunkWriter::new();
    let out = match encoding {
        Encoding::Identity => return Ok(body.clone()),
        Encoding::Gzip => {
            let level = match effort {
                Effort::Kept => 4,
                Effort::OneOff => 1,
            };
            let mut gzip = flate2::write::GzEncoder::new(out, flate2::Compression::new(level));
            write_chunks(&mut gzip, body)?;
            gzip.finish()?
        }
        Encoding::Brotli => {
            let params = brotli::enc::BrotliEncoderParams {
                quality: match effort {
                    Effort::Kept => 5,
                    Effort::OneOff => 1,
                },
                lgwin: BROTLI_WINDOW_BITS,
                // Without the size, the streaming encoder cuts small blocks: a workflow body
                // at quality 5 came out four times larger.
                size_hint: body.len(),
                ..Default::default()
            };
            let mut br = brotli::CompressorWriter::with_params(out, BROTLI_BUFFER, &params);
            write_chunks(&mut br, body)?;
            br.into_inner()
        }
    };
    Ok(out.finish())
}

fn write_chunks(out: &mut impl Write, body: &Body) -> io::Result<()> {
    for chunk in body.chunks() {
        out.write_all(chunk)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    fn body() -> Body {
        let mut w = ChunkWriter::new();
        for i in 0..200_000u32 {
            write!(w, r#"{{"id":"n{i}","label":"User Input"}},"#).unwrap();
        }
        w.finish()
    }

    #[test]
    fn variants_decode_to_the_body() {
        let body = body();
        let plain = body.to_bytes();
        for effort in [Effort::Kept, Effort::OneOff] {
            let gzip = compress(&body, Encoding::Gzip, effort).unwrap().to_bytes();
            let mut back = Vec::new();
            flate2::read::GzDecoder::new(&gzip[..])
                .read_to_end(&mut back)
                .unwrap();
            assert!(back == plain, "gzip {effort:?}");
            assert!(gzip.len() * 5 < plain.len());

            let br = compress(&body, Encoding::Brotli, effort).unwrap().to_bytes();
            let mut back = Vec::new();
            brotli::Decompressor::new(&br[..], 4096)
                .read_to_end(&mut back)
                .unwrap();
            assert!(back == plain, "br {effort:?}");
            assert!(br.len() * 5 < plain.len());
        }
        let same = compress(&body, Encoding::Identity, Effort::Kept).unwrap();
        assert_eq!(same.to_bytes(), plain);
    }

    /// Found measuring: the streaming brotli encoder, fed a body chunk by chunk without its
    /// size, made a workflow variant four times larger than fed at once.
    #[test]
    fn a_brotli_variant_does_not_depend_on_the_chunks() {
        let mut w = ChunkWriter::new();
        let mut seed = 7u64;
        for i in 0..60_000u32 {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let word = ["read", "write", "Bash", "Edit", "grep", "cargo", "test"][(seed >> 33) as usize % 7];
            write!(w, r#"{{"id":"n{i}","tool":"{word}","v":{}}},"#, seed >> 40).unwrap();
        }
        let chunked = w.finish();
        assert!(chunked.chunks().len() > 3);
        let whole = Body::from(chunked.to_bytes().to_vec());
        let size = |b: &Body| compress(b, Encoding::Brotli, Effort::Kept).unwrap().len();
        assert_eq!(size(&chunked), size(&whole));
    }
}

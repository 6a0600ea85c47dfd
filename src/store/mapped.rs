//! Files mapped into memory instead of read into it.
//!
//! A session keeps its files' bytes for its life: its records' text is slices of them. Read
//! into the heap, a file of a few hundred megabytes is first copied from the page cache
//! into fresh pages the kernel must zero first, which on a virtual machine takes as long
//! as parsing it. Mapped, the file's pages are the page cache's own: nothing is
//! zeroed or copied, they are shared with every other reader, and the kernel can drop and
//! fetch them again under memory pressure.
//!
//! Only files nothing rewrites are mapped: the uploads the store wrote itself (never
//! changed after they are written, replaced by a rename) and the files an operator gives
//! `sessiongraph export`. Files of a sessions directory are live logs (an agent may still
//! be appending, a user may truncate one): they are read.

use std::fs::File;
use std::io;

use bytes::Bytes;
use memmap2::Mmap;

/// The bytes of `file`, mapped (an empty file needs no mapping).
///
/// A mapped file that another process truncates while it is mapped ends this process with
/// `SIGBUS` on the next read of the lost pages: the reason only files that nothing
/// rewrites are mapped (see the module's documentation).
pub fn map_file(file: &File) -> io::Result<Bytes> {
    if file.metadata()?.len() == 0 {
        return Ok(Bytes::new());
    }
    // SAFETY: the mapping is read-only and lives as long as the `Bytes` that own it. Its
    // bytes stay valid unless the file is truncated behind it, which this module's callers
    // rule out by mapping only files nothing rewrites; a concurrent write (not a
    // truncation) could change bytes under a reader, which no caller does either.
    let map = unsafe { Mmap::map(file)? };
    Ok(Bytes::from_owner(map))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mapped_file_holds_its_bytes_and_an_empty_one_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"{\"a\":1}\n").unwrap();
        let bytes = map_file(&File::open(&path).unwrap()).unwrap();
        assert_eq!(&bytes[..], b"{\"a\":1}\n");
        std::fs::write(&path, b"").unwrap();
        assert!(map_file(&File::open(&path).unwrap()).unwrap().is_empty());
    }
}

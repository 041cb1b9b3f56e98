//! An initramfs as the kernel unpacks it: a `newc` cpio archive, left
//! uncompressed (every kernel takes one without a decompressor built in,
//! and a compressor would be a dependency for a file that lives seconds).
//! `kscale vm` writes one holding kscale, the libraries it links and a
//! shell, so that the guest runs the same binary as the host
//! (docs/vm.md).

use std::collections::BTreeSet;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

const S_IFDIR: u32 = 0o040_000;
const S_IFREG: u32 = 0o100_000;
const S_IFLNK: u32 = 0o120_000;
const S_IFCHR: u32 = 0o020_000;

/// A `newc` archive being written to `out`; parent directories are made
/// as entries need them.
pub struct Cpio<W: Write> {
    out: W,
    ino: u32,
    written: u64,
    dirs: BTreeSet<String>,
}

/// One entry's header fields that differ between kinds.
struct Head<'a> {
    name: &'a str,
    mode: u32,
    size: u64,
    nlink: u32,
    rdev: (u32, u32),
}

impl<W: Write> Cpio<W> {
    pub fn new(out: W) -> Self {
        Cpio {
            out,
            ino: 0,
            written: 0,
            dirs: BTreeSet::new(),
        }
    }

    fn pad(&mut self) -> io::Result<()> {
        let n = (4 - (self.written % 4) as usize) % 4;
        self.put(&[0u8; 3][..n])
    }

    fn put(&mut self, b: &[u8]) -> io::Result<()> {
        self.out.write_all(b)?;
        self.written += b.len() as u64;
        Ok(())
    }

    fn header(&mut self, h: Head<'_>) -> io::Result<()> {
        if h.size > u32::MAX as u64 {
            return Err(io::Error::other(format!(
                "{}: {} bytes, more than a cpio entry holds",
                h.name, h.size
            )));
        }
        self.ino += 1;
        let fields = [
            self.ino,
            h.mode,
            0, // uid
            0, // gid
            h.nlink,
            0, // mtime
            h.size as u32,
            0, // dev major
            0, // dev minor
            h.rdev.0,
            h.rdev.1,
            h.name.len() as u32 + 1,
            0, // check
        ];
        let mut s = String::from("070701");
        for f in fields {
            s.push_str(&format!("{f:08x}"));
        }
        self.put(s.as_bytes())?;
        self.put(h.name.as_bytes())?;
        self.put(&[0])?;
        self.pad()
    }

    /// `path` relative to the archive's root, its parents made first.
    fn parents(&mut self, path: &str) -> io::Result<String> {
        let rel = path.trim_start_matches('/').to_string();
        let mut at = String::new();
        let parts: Vec<&str> = rel.split('/').collect();
        for p in &parts[..parts.len().saturating_sub(1)] {
            if !at.is_empty() {
                at.push('/');
            }
            at.push_str(p);
            if self.dirs.insert(at.clone()) {
                let name = at.clone();
                self.header(Head {
                    name: &name,
                    mode: S_IFDIR | 0o755,
                    size: 0,
                    nlink: 2,
                    rdev: (0, 0),
                })?;
            }
        }
        Ok(rel)
    }

    pub fn dir(&mut self, path: &str) -> io::Result<()> {
        let rel = self.parents(path)?;
        if self.dirs.insert(rel.clone()) {
            self.header(Head {
                name: &rel,
                mode: S_IFDIR | 0o755,
                size: 0,
                nlink: 2,
                rdev: (0, 0),
            })?;
        }
        Ok(())
    }

    /// A regular file with `data`.
    pub fn file(&mut self, path: &str, mode: u32, data: &[u8]) -> io::Result<()> {
        self.file_from(path, mode, data.len() as u64, &mut &data[..])
    }

    /// A regular file of `size` bytes read from `src`.
    pub fn file_from(
        &mut self,
        path: &str,
        mode: u32,
        size: u64,
        src: &mut dyn Read,
    ) -> io::Result<()> {
        let rel = self.parents(path)?;
        self.header(Head {
            name: &rel,
            mode: S_IFREG | (mode & 0o7777),
            size,
            nlink: 1,
            rdev: (0, 0),
        })?;
        let copied = io::copy(&mut src.take(size), &mut self.out)?;
        self.written += copied;
        if copied != size {
            return Err(io::Error::other(format!(
                "{rel}: {copied} bytes read of {size}: the file changed while copied"
            )));
        }
        self.pad()
    }

    /// A copy of the host file `src` at `path`, its mode kept.
    pub fn copy(&mut self, path: &str, src: &Path) -> io::Result<()> {
        use std::os::unix::fs::PermissionsExt;
        let mut f = std::fs::File::open(src)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", src.display())))?;
        let meta = f.metadata()?;
        self.file_from(path, meta.permissions().mode(), meta.len(), &mut f)
    }

    /// A copy of the ELF executable `src` without what its loader never
    /// reads: the debug sections after its last segment, and the section
    /// table that names them. A debug build of kscale is ~180 MB, its
    /// segments ~30 MB, and the guest holds the archive twice while it
    /// unpacks it. A file that is not a 64-bit ELF is copied whole.
    pub fn copy_loadable(&mut self, path: &str, src: &Path) -> io::Result<()> {
        use std::os::unix::fs::PermissionsExt;
        let mut f = std::fs::File::open(src)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", src.display())))?;
        let meta = f.metadata()?;
        let mut head = vec![0u8; 64];
        if f.read_exact(&mut head).is_err() {
            return self.copy(path, src);
        }
        let Some(end) = loadable_end(&head, &mut f, meta.len())? else {
            return self.copy(path, src);
        };
        // No section table: e_shoff, e_shnum, e_shstrndx.
        head[0x28..0x30].fill(0);
        head[0x3c..0x40].fill(0);
        use std::io::Seek;
        f.seek(io::SeekFrom::Start(64))?;
        let mut body = (&head[..]).chain(f.take(end - 64));
        self.file_from(path, meta.permissions().mode(), end, &mut body)
    }

    pub fn symlink(&mut self, path: &str, target: &str) -> io::Result<()> {
        let rel = self.parents(path)?;
        self.header(Head {
            name: &rel,
            mode: S_IFLNK | 0o777,
            size: target.len() as u64,
            nlink: 1,
            rdev: (0, 0),
        })?;
        self.put(target.as_bytes())?;
        self.pad()
    }

    /// A character device node (`/dev/console` must exist before the
    /// kernel starts init, which gets it as its standard streams).
    pub fn char_dev(&mut self, path: &str, major: u32, minor: u32) -> io::Result<()> {
        let rel = self.parents(path)?;
        self.header(Head {
            name: &rel,
            mode: S_IFCHR | 0o600,
            size: 0,
            nlink: 1,
            rdev: (major, minor),
        })
    }

    /// Writes the trailer and hands back the sink.
    pub fn finish(mut self) -> io::Result<W> {
        self.header(Head {
            name: "TRAILER!!!",
            mode: 0,
            size: 0,
            nlink: 1,
            rdev: (0, 0),
        })?;
        self.out.flush()?;
        Ok(self.out)
    }
}

/// Where the last loaded byte of a little-endian 64-bit ELF file ends
/// (its segments and program headers), from its header `head` (64
/// bytes); `None` for another kind of file.
fn loadable_end(head: &[u8], f: &mut std::fs::File, len: u64) -> io::Result<Option<u64>> {
    use std::io::Seek;
    if &head[..4] != b"\x7fELF" || head[4] != 2 || head[5] != 1 {
        return Ok(None);
    }
    let u16_at = |b: &[u8], i: usize| u16::from_le_bytes([b[i], b[i + 1]]) as u64;
    let u64_at = |b: &[u8], i: usize| {
        let mut a = [0u8; 8];
        a.copy_from_slice(&b[i..i + 8]);
        u64::from_le_bytes(a)
    };
    let (phoff, phentsize, phnum) = (u64_at(head, 0x20), u16_at(head, 0x36), u16_at(head, 0x38));
    if phentsize < 56 || phnum == 0 || phoff + phentsize * phnum > len {
        return Ok(None);
    }
    let mut table = vec![0u8; (phentsize * phnum) as usize];
    f.seek(io::SeekFrom::Start(phoff))?;
    f.read_exact(&mut table)?;
    let mut end = phoff + phentsize * phnum;
    for e in table.chunks(phentsize as usize) {
        end = end.max(u64_at(e, 8) + u64_at(e, 32));
    }
    Ok((end <= len && end >= 64).then_some(end))
}

/// The shared libraries `bin` loads (its interpreter included), as `ldd`
/// names them: each path is where the dynamic loader looks for it, so the
/// guest needs it at that path. A static binary needs none.
pub fn needed_libs(bin: &Path) -> Result<Vec<PathBuf>, String> {
    let out = std::process::Command::new("ldd")
        .arg(bin)
        .output()
        .map_err(|e| {
            format!(
                "cannot run ldd to list the libraries of {}: {e}",
                bin.display()
            )
        })?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        if text.contains("not a dynamic") || err.contains("not a dynamic") {
            return Ok(Vec::new());
        }
        return Err(format!("ldd {}: {}", bin.display(), err.trim()));
    }
    parse_ldd(&text)
}

/// The paths in `ldd`'s output; a library it could not find is an error
/// naming it.
pub fn parse_ldd(text: &str) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.contains("statically linked") || line.is_empty() {
            continue;
        }
        if line.contains("=> not found") {
            return Err(format!("a library is missing: {line}"));
        }
        let path = match line.split_once("=>") {
            Some((_, right)) => right.split_whitespace().next(),
            None => line.split_whitespace().next(),
        };
        if let Some(p) = path.filter(|p| p.starts_with('/')) {
            out.push(PathBuf::from(p));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads the archive back: (name, mode, data) of each entry, as the
    /// kernel's unpacker would see them.
    fn entries(b: &[u8]) -> Vec<(String, u32, Vec<u8>)> {
        let mut out = Vec::new();
        let mut at = 0;
        let field = |b: &[u8], at: usize, i: usize| {
            let s = std::str::from_utf8(&b[at + 6 + 8 * i..at + 14 + 8 * i]).unwrap();
            u32::from_str_radix(s, 16).unwrap() as usize
        };
        loop {
            assert_eq!(&b[at..at + 6], b"070701", "magic at {at}");
            let mode = field(b, at, 1) as u32;
            let size = field(b, at, 6);
            let namesize = field(b, at, 11);
            let name = std::str::from_utf8(&b[at + 110..at + 110 + namesize - 1])
                .unwrap()
                .to_string();
            let data_at = (at + 110 + namesize).div_ceil(4) * 4;
            if name == "TRAILER!!!" {
                return out;
            }
            out.push((name, mode, b[data_at..data_at + size].to_vec()));
            at = (data_at + size).div_ceil(4) * 4;
        }
    }

    #[test]
    fn an_archive_reads_back_with_its_parents_made_once() {
        let mut c = Cpio::new(Vec::new());
        c.file("/bin/a", 0o755, b"hello").unwrap();
        c.file("bin/bc", 0o644, b"").unwrap();
        c.symlink("init", "bin/a").unwrap();
        c.char_dev("dev/console", 5, 1).unwrap();
        c.dir("tmp").unwrap();
        let b = c.finish().unwrap();
        assert_eq!(b.len() % 4, 0);
        let e = entries(&b);
        let names: Vec<&str> = e.iter().map(|x| x.0.as_str()).collect();
        assert_eq!(
            names,
            [
                "bin",
                "bin/a",
                "bin/bc",
                "init",
                "dev",
                "dev/console",
                "tmp"
            ]
        );
        assert_eq!(e[1].2, b"hello");
        assert_eq!(e[1].1, S_IFREG | 0o755);
        assert_eq!(e[3].2, b"bin/a");
        assert_eq!(e[5].1 & 0o170_000, S_IFCHR);
    }

    #[test]
    fn an_executable_loses_what_its_loader_never_reads() {
        let exe = std::env::current_exe().unwrap();
        let mut c = Cpio::new(Vec::new());
        c.copy_loadable("bin/t", &exe).unwrap();
        let e = entries(&c.finish().unwrap());
        let (_, _, data) = &e[1];
        let full = std::fs::read(&exe).unwrap();
        assert!(data.len() <= full.len());
        assert_eq!(&data[..4], b"\x7fELF");
        // The segments are byte for byte the file's.
        assert_eq!(&data[64..], &full[64..data.len()]);
        assert_eq!(&data[0x28..0x30], &[0u8; 8]);
        // Not an ELF: copied whole.
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s");
        std::fs::write(&p, b"#!/bin/sh\n").unwrap();
        let mut c = Cpio::new(Vec::new());
        c.copy_loadable("s", &p).unwrap();
        assert_eq!(entries(&c.finish().unwrap())[0].2, b"#!/bin/sh\n");
    }

    #[test]
    fn a_short_source_is_an_error() {
        let mut c = Cpio::new(Vec::new());
        let err = c.file_from("x", 0o644, 10, &mut &b"abc"[..]).unwrap_err();
        assert!(err.to_string().contains("3 bytes read of 10"), "{err}");
    }

    #[test]
    fn ldd_output_gives_the_loaders_paths() {
        let text = "\tlinux-vdso.so.1 (0x00007ffd)\n\tlibgcc_s.so.1 => /lib/x86_64-linux-gnu/libgcc_s.so.1 (0x00007f)\n\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f)\n\t/lib64/ld-linux-x86-64.so.2 (0x00007f)\n";
        let libs = parse_ldd(text).unwrap();
        assert_eq!(
            libs,
            [
                PathBuf::from("/lib/x86_64-linux-gnu/libgcc_s.so.1"),
                PathBuf::from("/lib/x86_64-linux-gnu/libc.so.6"),
                PathBuf::from("/lib64/ld-linux-x86-64.so.2"),
            ]
        );
        assert!(parse_ldd("\tlibfoo.so => not found\n")
            .unwrap_err()
            .contains("libfoo"));
        assert!(parse_ldd("\tstatically linked\n").unwrap().is_empty());
    }
}

//! Bounded output capture: the head and tail of a stream stay in memory, and once the stream
//! outgrows them the whole stream is spooled to a file (itself capped), so a flood of output
//! costs bounded memory and the truncation is always stated.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

/// One captured stream.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Captured {
    /// The first bytes (up to half the output limit).
    pub head: Vec<u8>,
    /// The last bytes (up to half the output limit), following `head` after `omitted_bytes`.
    pub tail: Vec<u8>,
    /// Every byte the command wrote to this stream.
    pub total_bytes: u64,
    /// Bytes between `head` and `tail` that are not in memory.
    pub omitted_bytes: u64,
    /// The file holding the full stream (from its first byte, up to the spool limit), if the
    /// stream outgrew the output limit and a spool directory was given.
    pub spool: Option<PathBuf>,
}

impl Captured {
    /// Head and tail as text, with an explicit marker where bytes were left out.
    pub fn text_lossy(&self) -> String {
        let mut text = String::from_utf8_lossy(&self.head).into_owned();
        if self.omitted_bytes > 0 {
            if !text.ends_with('\n') && !text.is_empty() {
                text.push('\n');
            }
            match &self.spool {
                Some(path) => text.push_str(&format!(
                    "[… {} bytes omitted; full output in {}]\n",
                    self.omitted_bytes,
                    path.display()
                )),
                None => text.push_str(&format!("[… {} bytes omitted]\n", self.omitted_bytes)),
            }
        }
        text.push_str(&String::from_utf8_lossy(&self.tail));
        text
    }

    /// True when some output is not in `head`/`tail`.
    pub fn is_truncated(&self) -> bool {
        self.omitted_bytes > 0
    }
}

/// Accumulates one stream into a [`Captured`].
pub(crate) struct Collector {
    head_cap: usize,
    tail_cap: usize,
    head: Vec<u8>,
    tail: VecDeque<u8>,
    total: u64,
    spool_dir: Option<PathBuf>,
    stream: &'static str,
    spool: Option<(PathBuf, BufWriter<File>)>,
    spool_written: u64,
    spool_cap: u64,
    spool_error: Option<io::Error>,
}

impl Collector {
    /// The stdout and stderr collectors of one run, as `spec` bounds them.
    pub(crate) fn pair_for(spec: &crate::SandboxSpec) -> (Collector, Collector) {
        let dir = spec.spool_dir.as_deref();
        let cap = spec.limits.spool_bytes;
        (
            Collector::new(spec.output_limit, dir, "stdout", cap),
            Collector::new(spec.output_limit, dir, "stderr", cap),
        )
    }

    pub(crate) fn new(
        limit: usize,
        spool_dir: Option<&Path>,
        stream: &'static str,
        spool_cap: u64,
    ) -> Self {
        let head_cap = limit / 2;
        Collector {
            head_cap,
            tail_cap: limit - head_cap,
            head: Vec::new(),
            tail: VecDeque::new(),
            total: 0,
            spool_dir: spool_dir.map(Path::to_path_buf),
            stream,
            spool: None,
            spool_written: 0,
            spool_cap,
            spool_error: None,
        }
    }

    pub(crate) fn push(&mut self, data: &[u8]) {
        self.total += data.len() as u64;
        let mut rest = data;
        if self.head.len() < self.head_cap {
            let n = (self.head_cap - self.head.len()).min(rest.len());
            self.head.extend_from_slice(&rest[..n]);
            rest = &rest[n..];
        }
        if rest.is_empty() {
            return;
        }
        if self.spool.is_none()
            && self.spool_error.is_none()
            && self.tail.len() + rest.len() > self.tail_cap
        {
            self.start_spool();
        }
        if self.spool.is_some() {
            self.spool_bytes(rest);
        }
        if rest.len() >= self.tail_cap {
            self.tail.clear();
            self.tail.extend(&rest[rest.len() - self.tail_cap..]);
        } else {
            self.tail.extend(rest);
            let excess = self.tail.len().saturating_sub(self.tail_cap);
            self.tail.drain(..excess);
        }
    }

    fn start_spool(&mut self) {
        let Some(dir) = &self.spool_dir else { return };
        let created = tempfile::Builder::new()
            .prefix(&format!("{}-", self.stream))
            .suffix(".log")
            .tempfile_in(dir)
            .and_then(|f| f.keep().map_err(|e| e.error));
        match created {
            Ok((file, path)) => {
                self.spool = Some((path, BufWriter::with_capacity(64 << 10, file)));
                let head = std::mem::take(&mut self.head);
                self.spool_bytes(&head);
                self.head = head;
                let (a, b) = self.tail.as_slices();
                let (a, b) = (a.to_vec(), b.to_vec());
                self.spool_bytes(&a);
                self.spool_bytes(&b);
            }
            Err(e) => self.spool_error = Some(e),
        }
    }

    fn spool_bytes(&mut self, data: &[u8]) {
        let room = self.spool_cap.saturating_sub(self.spool_written);
        let n = usize::try_from(room).map_or(data.len(), |room| data.len().min(room));
        if n == 0 {
            return;
        }
        if let Some((_, w)) = &mut self.spool {
            if let Err(e) = w.write_all(&data[..n]) {
                self.spool_error = Some(e);
                return;
            }
            self.spool_written += n as u64;
        }
    }

    pub(crate) fn finish(mut self) -> Captured {
        let spool = self.spool.take().and_then(|(path, mut w)| match w.flush() {
            Ok(()) => Some(path),
            Err(_) => None,
        });
        let tail: Vec<u8> = self.tail.into_iter().collect();
        let kept = (self.head.len() + tail.len()) as u64;
        Captured {
            omitted_bytes: self.total - kept,
            total_bytes: self.total,
            head: self.head,
            tail,
            spool,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(limit: usize, chunks: &[&[u8]], dir: Option<&Path>) -> Captured {
        let mut c = Collector::new(limit, dir, "stdout", 1 << 20);
        for chunk in chunks {
            c.push(chunk);
        }
        c.finish()
    }

    #[test]
    fn small_output_is_kept_whole() {
        let cap = collect(16, &[b"hello ", b"world"], None);
        assert_eq!(cap.text_lossy(), "hello world");
        assert_eq!(cap.total_bytes, 11);
        assert!(!cap.is_truncated());
    }

    #[test]
    fn long_output_keeps_head_and_tail_and_spools_everything() {
        let dir = tempfile::tempdir().unwrap();
        let data: Vec<u8> = (0..1000u32).map(|i| b'a' + (i % 26) as u8).collect();
        let chunks: Vec<&[u8]> = data.chunks(7).collect();
        let cap = collect(100, &chunks, Some(dir.path()));
        assert_eq!(cap.head, &data[..50]);
        assert_eq!(cap.tail, &data[950..]);
        assert_eq!(cap.omitted_bytes, 900);
        let spool = cap.spool.clone().expect("spooled");
        assert_eq!(std::fs::read(&spool).unwrap(), data);
        let text = cap.text_lossy();
        assert!(
            text.contains("[… 900 bytes omitted; full output in "),
            "{text}"
        );
    }

    #[test]
    fn without_spool_dir_the_middle_is_dropped_and_said() {
        let data = vec![b'x'; 500];
        let cap = collect(10, &[&data], None);
        assert_eq!(cap.head.len() + cap.tail.len(), 10);
        assert_eq!(cap.omitted_bytes, 490);
        assert!(cap.text_lossy().contains("[… 490 bytes omitted]"));
    }

    #[test]
    fn spool_is_capped() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = Collector::new(10, Some(dir.path()), "stderr", 100);
        for _ in 0..50 {
            c.push(&[b'y'; 10]);
        }
        let cap = c.finish();
        assert_eq!(cap.total_bytes, 500);
        assert_eq!(std::fs::metadata(cap.spool.unwrap()).unwrap().len(), 100);
    }
}

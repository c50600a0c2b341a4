//! The whole-file check of a GGUF model before it is installed (`import`, `pull`): the header,
//! every metadata entry, every tensor's description, and that the file holds all the tensor
//! data the header declares, so a truncated copy or download is refused before it is
//! installed rather than when llama.cpp loads it.
//!
//! The layout is llama.cpp's (`ggml/src/gguf.cpp`, versions 2 and 3, little-endian): the magic,
//! the version, the tensor count and the metadata count (u64 each); the metadata entries (a
//! string key, a u32 type, a value); the tensor descriptions (a name, a u32 dimension count,
//! that many u64 dimensions, a u32 ggml type, a u64 offset); padding to the alignment
//! (`general.alignment`, default 32); then the tensor data, each tensor at its offset. The same
//! rules as llama.cpp's reader are applied where a break would make the file unloadable:
//! offsets follow one another with padding, a row is a whole number of blocks, a type exists.

use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::Path;

use super::{ModelError, check_gguf};

/// `GGUF_DEFAULT_ALIGNMENT`.
const DEFAULT_ALIGNMENT: u64 = 32;

/// `GGML_MAX_DIMS`.
const MAX_DIMS: u32 = 4;

/// `GGML_MAX_NAME`: a tensor's name is shorter than this.
const MAX_TENSOR_NAME: u64 = 64;

/// The longest string read into memory (keys, and `general.architecture`); longer string
/// values (a tokenizer's chat template, say) are skipped, not read.
const MAX_READ_STRING: u64 = 1 << 16;

/// What the check learned of a valid file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GgufSummary {
    pub version: u32,
    pub tensors: u64,
    pub metadata: u64,
    /// `general.architecture` (`llama`, `qwen2`, …), when present.
    pub architecture: Option<String>,
    /// The bytes the file needs: up to the end of the last tensor's data.
    pub needed_bytes: u64,
}

/// Block size (elements) and block bytes of each ggml type a GGUF file may hold, by type id,
/// as in llama.cpp's `type_traits` (`ggml/src/ggml.c`); `None`: removed or unknown.
fn ggml_type(id: u32) -> Option<(u64, u64)> {
    Some(match id {
        0 => (1, 4),      // F32
        1 => (1, 2),      // F16
        2 => (32, 18),    // Q4_0
        3 => (32, 20),    // Q4_1
        6 => (32, 22),    // Q5_0
        7 => (32, 24),    // Q5_1
        8 => (32, 34),    // Q8_0
        9 => (32, 36),    // Q8_1
        10 => (256, 84),  // Q2_K
        11 => (256, 110), // Q3_K
        12 => (256, 144), // Q4_K
        13 => (256, 176), // Q5_K
        14 => (256, 210), // Q6_K
        15 => (256, 292), // Q8_K
        16 => (256, 66),  // IQ2_XXS
        17 => (256, 74),  // IQ2_XS
        18 => (256, 98),  // IQ3_XXS
        19 => (256, 50),  // IQ1_S
        20 => (32, 18),   // IQ4_NL
        21 => (256, 110), // IQ3_S
        22 => (256, 82),  // IQ2_S
        23 => (256, 136), // IQ4_XS
        24 => (1, 1),     // I8
        25 => (1, 2),     // I16
        26 => (1, 4),     // I32
        27 => (1, 8),     // I64
        28 => (1, 8),     // F64
        29 => (256, 56),  // IQ1_M
        30 => (1, 2),     // BF16
        34 => (256, 54),  // TQ1_0
        35 => (256, 66),  // TQ2_0
        39 => (32, 17),   // MXFP4
        40 => (64, 36),   // NVFP4
        41 => (128, 18),  // Q1_0
        42 => (64, 18),   // Q2_0
        _ => return None,
    })
}

/// The metadata value types.
const T_STRING: u32 = 8;
const T_ARRAY: u32 = 9;

/// Bytes of one value of a fixed-size metadata type; `None` for string, array and unknown.
fn fixed_size(value_type: u32) -> Option<u64> {
    match value_type {
        0 | 1 | 7 => Some(1), // u8, i8, bool
        2 | 3 => Some(2),     // u16, i16
        4..=6 => Some(4),     // u32, i32, f32
        10..=12 => Some(8),   // u64, i64, f64
        _ => None,
    }
}

/// A reader that knows how far it is and how much is left.
struct Cursor {
    inner: BufReader<File>,
    pos: u64,
    len: u64,
}

/// Why reading stopped: the file ended, or it could not be read.
enum Stop {
    Eof,
    Io(io::Error),
    Bad(String),
}

impl From<io::Error> for Stop {
    fn from(e: io::Error) -> Stop {
        if e.kind() == io::ErrorKind::UnexpectedEof {
            Stop::Eof
        } else {
            Stop::Io(e)
        }
    }
}

impl Cursor {
    fn bytes<const N: usize>(&mut self) -> Result<[u8; N], Stop> {
        let mut b = [0u8; N];
        self.inner.read_exact(&mut b)?;
        self.pos += N as u64;
        Ok(b)
    }

    fn u32(&mut self) -> Result<u32, Stop> {
        Ok(u32::from_le_bytes(self.bytes()?))
    }

    fn u64(&mut self) -> Result<u64, Stop> {
        Ok(u64::from_le_bytes(self.bytes()?))
    }

    fn remaining(&self) -> u64 {
        self.len.saturating_sub(self.pos)
    }

    fn skip(&mut self, n: u64) -> Result<(), Stop> {
        if n > self.remaining() {
            return Err(Stop::Eof);
        }
        let n_i64 = i64::try_from(n).map_err(|_| Stop::Eof)?;
        self.inner.seek_relative(n_i64)?;
        self.pos += n;
        Ok(())
    }

    /// A string's length, checked against what is left of the file.
    fn string_len(&mut self) -> Result<u64, Stop> {
        let n = self.u64()?;
        if n > self.remaining() {
            return Err(Stop::Eof);
        }
        Ok(n)
    }

    /// A string of at most `max` bytes, read (invalid UTF-8 is replaced).
    fn string(&mut self, max: u64, what: &str) -> Result<String, Stop> {
        let n = self.string_len()?;
        if n > max {
            return Err(Stop::Bad(format!("{what} is {n} bytes long")));
        }
        let mut b = vec![0u8; n as usize];
        self.inner.read_exact(&mut b)?;
        self.pos += n;
        Ok(String::from_utf8_lossy(&b).into_owned())
    }

    fn skip_string(&mut self) -> Result<(), Stop> {
        let n = self.string_len()?;
        self.skip(n)
    }

    /// Skips one value of `value_type` (an array's items too).
    fn skip_value(&mut self, value_type: u32, key: &str) -> Result<(), Stop> {
        match value_type {
            T_STRING => self.skip_string(),
            T_ARRAY => {
                let item = self.u32()?;
                let n = self.u64()?;
                match item {
                    T_STRING => (0..n).try_for_each(|_| self.skip_string()),
                    T_ARRAY => Err(Stop::Bad(format!("metadata `{key}` nests arrays"))),
                    t => {
                        let size = fixed_size(t).ok_or_else(|| {
                            Stop::Bad(format!("metadata `{key}` has unknown item type {t}"))
                        })?;
                        self.skip(n.checked_mul(size).ok_or(Stop::Eof)?)
                    }
                }
            }
            t => {
                let size = fixed_size(t)
                    .ok_or_else(|| Stop::Bad(format!("metadata `{key}` has unknown type {t}")))?;
                self.skip(size)
            }
        }
    }
}

/// Checks the whole structure of the GGUF file at `path` (see the module's doc); a file that
/// ends before its header does, or before the end of its tensor data, is `Truncated`.
pub fn verify_gguf(path: &Path) -> Result<GgufSummary, ModelError> {
    check_gguf(path)?;
    let file = File::open(path).map_err(|e| ModelError::io(path, e))?;
    let len = file.metadata().map_err(|e| ModelError::io(path, e))?.len();
    let mut c = Cursor {
        inner: BufReader::with_capacity(1 << 16, file),
        pos: 0,
        len,
    };
    match read(&mut c) {
        Ok(summary) if summary.needed_bytes > len => Err(ModelError::Truncated {
            path: path.to_path_buf(),
            needed: summary.needed_bytes,
            actual: len,
        }),
        Ok(summary) => Ok(summary),
        Err(Stop::Eof) => Err(ModelError::Truncated {
            path: path.to_path_buf(),
            // Not known: the header itself is cut.
            needed: 0,
            actual: len,
        }),
        Err(Stop::Io(e)) => Err(ModelError::io(path, e)),
        Err(Stop::Bad(reason)) => Err(ModelError::NotGguf {
            path: path.to_path_buf(),
            reason,
        }),
    }
}

fn read(c: &mut Cursor) -> Result<GgufSummary, Stop> {
    let _magic: [u8; 4] = c.bytes()?; // checked by check_gguf
    let version = c.u32()?;
    let tensors = c.u64()?;
    let metadata = c.u64()?;
    let mut alignment = DEFAULT_ALIGNMENT;
    let mut architecture = None;
    for _ in 0..metadata {
        let key = c.string(MAX_READ_STRING, "a metadata key")?;
        let value_type = c.u32()?;
        match (key.as_str(), value_type) {
            ("general.alignment", 4) => {
                alignment = u64::from(c.u32()?);
                if alignment == 0 || !alignment.is_power_of_two() {
                    return Err(Stop::Bad(format!(
                        "its alignment {alignment} is not a power of 2"
                    )));
                }
            }
            ("general.alignment", t) => {
                return Err(Stop::Bad(format!(
                    "`general.alignment` has type {t}, not u32"
                )));
            }
            ("general.architecture", T_STRING) => {
                architecture = Some(c.string(MAX_READ_STRING, "`general.architecture`")?);
            }
            (_, t) => c.skip_value(t, &key)?,
        }
    }
    // Tensor descriptions: each tensor's data starts where the previous one's (padded) ends.
    let pad = |n: u64| n.div_ceil(alignment).checked_mul(alignment);
    let mut data_size: u64 = 0;
    let mut data_end: u64 = 0;
    for i in 0..tensors {
        let name = c.string(MAX_TENSOR_NAME - 1, &format!("the name of tensor {i}"))?;
        let dims = c.u32()?;
        if dims > MAX_DIMS {
            return Err(Stop::Bad(format!("tensor `{name}` has {dims} dimensions")));
        }
        let mut shape = [1u64; MAX_DIMS as usize];
        for d in shape.iter_mut().take(dims as usize) {
            *d = c.u64()?;
            if *d > i64::MAX as u64 {
                return Err(Stop::Bad(format!(
                    "tensor `{name}` has a negative dimension"
                )));
            }
        }
        let type_id = c.u32()?;
        let (block, block_bytes) = ggml_type(type_id).ok_or_else(|| {
            Stop::Bad(format!(
                "tensor `{name}` has type {type_id}, which this llama.cpp does not know"
            ))
        })?;
        if shape[0] % block != 0 {
            return Err(Stop::Bad(format!(
                "tensor `{name}` has rows of {} elements, not a whole number of blocks of {block}",
                shape[0]
            )));
        }
        let too_big = || Stop::Bad(format!("tensor `{name}` is too big"));
        let bytes = shape[1..]
            .iter()
            .try_fold((shape[0] / block) * block_bytes, |acc, d| {
                acc.checked_mul(*d)
            })
            .ok_or_else(too_big)?;
        let offset = c.u64()?;
        if offset != data_size {
            return Err(Stop::Bad(format!(
                "tensor `{name}` is at offset {offset}, expected {data_size}"
            )));
        }
        data_end = offset.checked_add(bytes).ok_or_else(too_big)?;
        data_size = pad(bytes)
            .and_then(|p| data_size.checked_add(p))
            .ok_or_else(too_big)?;
    }
    let data_start = if tensors > 0 {
        pad(c.pos).ok_or(Stop::Eof)?
    } else {
        c.pos
    };
    Ok(GgufSummary {
        version,
        tensors,
        metadata,
        architecture,
        needed_bytes: data_start.saturating_add(data_end),
    })
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A GGUF file: `meta` (key, type, value bytes) then `tensors` of F32 vectors of the given
    /// lengths, with their data (each padded to 32 bytes).
    pub fn gguf(meta: &[(&str, u32, Vec<u8>)], tensors: &[(&str, u64)]) -> Vec<u8> {
        let mut b = b"GGUF".to_vec();
        b.extend(3u32.to_le_bytes());
        b.extend((tensors.len() as u64).to_le_bytes());
        b.extend((meta.len() as u64).to_le_bytes());
        let string = |b: &mut Vec<u8>, s: &str| {
            b.extend((s.len() as u64).to_le_bytes());
            b.extend(s.as_bytes());
        };
        for (k, t, v) in meta {
            string(&mut b, k);
            b.extend(t.to_le_bytes());
            b.extend(v);
        }
        let mut offset = 0u64;
        for (name, n) in tensors {
            string(&mut b, name);
            b.extend(1u32.to_le_bytes());
            b.extend(n.to_le_bytes());
            b.extend(0u32.to_le_bytes()); // F32
            b.extend(offset.to_le_bytes());
            offset += (n * 4).div_ceil(32) * 32;
        }
        if !tensors.is_empty() {
            b.resize(b.len().div_ceil(32) * 32, 0);
        }
        for (i, (_, n)) in tensors.iter().enumerate() {
            let start = b.len();
            b.extend(std::iter::repeat_n(i as u8 + 1, (n * 4) as usize));
            if i + 1 < tensors.len() {
                b.resize(start + ((n * 4).div_ceil(32) * 32) as usize, 0);
            }
        }
        b
    }

    pub fn string_value(s: &str) -> Vec<u8> {
        let mut v = (s.len() as u64).to_le_bytes().to_vec();
        v.extend(s.as_bytes());
        v
    }

    /// A small but complete model file: an architecture, an array of strings, two tensors.
    pub fn small_model() -> Vec<u8> {
        let mut tokens = T_STRING.to_le_bytes().to_vec(); // an array of strings
        tokens.extend(3u64.to_le_bytes());
        for t in ["a", "bc", "def"] {
            tokens.extend(string_value(t));
        }
        gguf(
            &[
                ("general.architecture", T_STRING, string_value("llama")),
                ("llama.context_length", 4, 2048u32.to_le_bytes().to_vec()),
                ("tokenizer.ggml.tokens", T_ARRAY, tokens),
                ("general.flag", 7, vec![1]),
            ],
            &[("token_embd.weight", 40), ("output.weight", 9)],
        )
    }

    fn write(bytes: &[u8]) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.gguf");
        std::fs::write(&path, bytes).unwrap();
        (dir, path)
    }

    #[test]
    fn a_complete_file_passes_and_is_described() {
        let bytes = small_model();
        let (_dir, path) = write(&bytes);
        let s = verify_gguf(&path).unwrap();
        assert_eq!(s.version, 3);
        assert_eq!(s.tensors, 2);
        assert_eq!(s.metadata, 4);
        assert_eq!(s.architecture.as_deref(), Some("llama"));
        assert_eq!(s.needed_bytes, bytes.len() as u64);
        // No tensors at all is a valid (if useless) file.
        let (_dir, path) = write(&gguf(&[], &[]));
        assert_eq!(verify_gguf(&path).unwrap().needed_bytes, 24);
    }

    #[test]
    fn a_truncated_file_is_refused_wherever_it_is_cut() {
        let bytes = small_model();
        let full = bytes.len() as u64;
        // In the tensor data: the header is whole, the data is not.
        for cut in [full - 1, full - 36] {
            let (_dir, path) = write(&bytes[..cut as usize]);
            let e = verify_gguf(&path).unwrap_err();
            match &e {
                ModelError::Truncated { needed, actual, .. } => {
                    assert_eq!((*needed, *actual), (full, cut));
                }
                other => panic!("{other}"),
            }
            let msg = e.to_string();
            assert!(msg.contains("truncated") && msg.contains("m.gguf"), "{msg}");
            assert!(msg.contains(&format!("{full} bytes")), "{msg}");
        }
        // In the header: the metadata or the tensor descriptions.
        for cut in [30, 60, 200] {
            let (_dir, path) = write(&bytes[..cut]);
            let e = verify_gguf(&path).unwrap_err();
            assert!(matches!(e, ModelError::Truncated { needed: 0, .. }), "{e}");
            assert!(e.to_string().contains("ends inside its header"), "{e}");
        }
    }

    #[test]
    fn structural_faults_are_named() {
        let bad = |meta: &[(&str, u32, Vec<u8>)], tensors: &[(&str, u64)], why: &str| {
            let (_dir, path) = write(&gguf(meta, tensors));
            let e = verify_gguf(&path).unwrap_err();
            assert!(matches!(e, ModelError::NotGguf { .. }), "{e}");
            assert!(e.to_string().contains(why), "{why}: {e}");
        };
        bad(&[("x", 99, vec![0; 8])], &[], "unknown type 99");
        bad(
            &[("general.alignment", 4, 24u32.to_le_bytes().to_vec())],
            &[],
            "not a power of 2",
        );
        bad(
            &[("general.alignment", 10, 32u64.to_le_bytes().to_vec())],
            &[],
            "not u32",
        );
        let mut nested = T_ARRAY.to_le_bytes().to_vec();
        nested.extend(1u64.to_le_bytes());
        bad(&[("a", T_ARRAY, nested)], &[], "nests arrays");
        // A tensor of a type that does not exist: patch the F32 type id of the only tensor.
        let mut bytes = gguf(&[], &[("t", 8)]);
        let at = 24 + 8 + 1 + 4 + 8;
        bytes[at..at + 4].copy_from_slice(&99u32.to_le_bytes());
        let (_dir, path) = write(&bytes);
        let e = verify_gguf(&path).unwrap_err();
        assert!(e.to_string().contains("type 99"), "{e}");
        // An offset out of sequence.
        let mut bytes = gguf(&[], &[("t", 8)]);
        bytes[at + 4..at + 12].copy_from_slice(&64u64.to_le_bytes());
        let (_dir, path) = write(&bytes);
        let e = verify_gguf(&path).unwrap_err();
        assert!(e.to_string().contains("offset 64, expected 0"), "{e}");
    }

    /// The model the local engine's tests use, when it is installed: the real thing passes,
    /// and a copy without its last byte does not.
    #[test]
    fn the_installed_model_passes_and_its_head_does_not() {
        let Some(model) = convo_client_free_default_model() else {
            return;
        };
        let s = verify_gguf(&model).unwrap();
        assert_eq!(s.architecture.as_deref(), Some("llama"));
        let len = std::fs::metadata(&model).unwrap().len();
        assert!(
            s.needed_bytes <= len && s.needed_bytes + 64 > len,
            "{s:?} {len}"
        );
        let dir = tempfile::tempdir().unwrap();
        let head = dir.path().join("head.gguf");
        let mut bytes = std::fs::read(&model).unwrap();
        bytes.truncate(5_000_000);
        std::fs::write(&head, bytes).unwrap();
        assert!(matches!(
            verify_gguf(&head),
            Err(ModelError::Truncated { .. })
        ));
    }

    /// `$CONVO_TEST_MODEL`, else SmolLM2-135M-Instruct in the usual data dir, if it is there.
    fn convo_client_free_default_model() -> Option<std::path::PathBuf> {
        if let Some(p) = std::env::var_os("CONVO_TEST_MODEL") {
            return Some(p.into());
        }
        let data = std::env::var_os("CONVO_DATA_DIR")
            .map(std::path::PathBuf::from)
            .or_else(|| {
                std::env::var_os("XDG_DATA_HOME").map(|d| std::path::PathBuf::from(d).join("convo"))
            })
            .or_else(|| {
                std::env::var_os("HOME")
                    .map(|h| std::path::PathBuf::from(h).join(".local/share/convo"))
            })?;
        let p = data.join("models/SmolLM2-135M-Instruct.gguf");
        p.is_file().then_some(p)
    }
}

//! Numeric arrays on disk: `.npy` (every real dtype numpy writes, either byte order, C or
//! Fortran order; converted to u32, i32, f32 or f16 where the values fit),
//! `.json` (nested arrays of numbers), text (`.txt`, `.csv`: numbers separated by commas,
//! spaces or newlines; one row per line for matrices) and raw `.bin` (with a dtype).
//! Arrays are held in C order whatever the file's order.

use std::io::{Read, Write};
use std::path::Path;

use anyhow::{anyhow, bail, Context, Result};
use half::f16;

use super::output::PendingFile;

/// Element types gpukit's array ops take.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    U32,
    I32,
    F32,
    F16,
}

impl DType {
    pub fn name(self) -> &'static str {
        match self {
            DType::U32 => "u32",
            DType::I32 => "i32",
            DType::F32 => "f32",
            DType::F16 => "f16",
        }
    }

    fn npy_descr(self) -> &'static str {
        match self {
            DType::U32 => "<u4",
            DType::I32 => "<i4",
            DType::F32 => "<f4",
            DType::F16 => "<f2",
        }
    }

    pub fn size(self) -> usize {
        match self {
            DType::F16 => 2,
            _ => 4,
        }
    }
}

/// The elements of an array, in C order.
#[derive(Clone, Debug, PartialEq)]
pub enum Data {
    U32(Vec<u32>),
    I32(Vec<i32>),
    F32(Vec<f32>),
    F16(Vec<f16>),
}

impl Data {
    pub fn dtype(&self) -> DType {
        match self {
            Data::U32(_) => DType::U32,
            Data::I32(_) => DType::I32,
            Data::F32(_) => DType::F32,
            Data::F16(_) => DType::F16,
        }
    }

    pub fn len(&self) -> usize {
        match self {
            Data::U32(v) => v.len(),
            Data::I32(v) => v.len(),
            Data::F32(v) => v.len(),
            Data::F16(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The raw little-endian bytes (the host is little-endian on every platform gpukit builds for).
    pub fn bytes(&self) -> &[u8] {
        match self {
            Data::U32(v) => bytemuck::cast_slice(v),
            Data::I32(v) => bytemuck::cast_slice(v),
            Data::F32(v) => bytemuck::cast_slice(v),
            Data::F16(v) => bytemuck::cast_slice(v),
        }
    }

    fn from_bytes(dtype: DType, bytes: &[u8]) -> Data {
        match dtype {
            DType::U32 => Data::U32(bytemuck::pod_collect_to_vec(bytes)),
            DType::I32 => Data::I32(bytemuck::pod_collect_to_vec(bytes)),
            DType::F32 => Data::F32(bytemuck::pod_collect_to_vec(bytes)),
            DType::F16 => Data::F16(bytemuck::pod_collect_to_vec(bytes)),
        }
    }

    /// Element `i` as f64, for text output and comparisons.
    pub fn get_f64(&self, i: usize) -> f64 {
        match self {
            Data::U32(v) => v[i] as f64,
            Data::I32(v) => v[i] as f64,
            Data::F32(v) => v[i] as f64,
            Data::F16(v) => v[i].to_f64(),
        }
    }

    /// Converts to f32 (matmul's working type). Integers convert with rounding.
    pub fn to_f32(&self) -> Vec<f32> {
        match self {
            Data::U32(v) => v.iter().map(|&x| x as f32).collect(),
            Data::I32(v) => v.iter().map(|&x| x as f32).collect(),
            Data::F32(v) => v.clone(),
            Data::F16(v) => v.iter().map(|x| x.to_f32()).collect(),
        }
    }
}

/// An n-dimensional array in C order.
#[derive(Clone, Debug, PartialEq)]
pub struct Array {
    pub shape: Vec<usize>,
    pub data: Data,
}

impl Array {
    pub fn vector(data: Data) -> Array {
        Array {
            shape: vec![data.len()],
            data,
        }
    }
}

/// File formats, chosen by extension or by flag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Npy,
    Json,
    /// Text: `.txt` or `.csv`.
    Text,
    /// Raw little-endian elements; needs a dtype.
    Bin,
}

impl Format {
    /// The format an extension names, if any.
    pub fn from_path(path: &Path) -> Option<Format> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        Some(match ext.as_str() {
            "npy" => Format::Npy,
            "json" => Format::Json,
            "txt" | "csv" | "tsv" => Format::Text,
            "bin" | "raw" => Format::Bin,
            _ => return None,
        })
    }
}

/// Reads an array from `path` (`-` for stdin). `dtype` is what text, JSON and raw input are
/// read as (for .npy it must match the file's, when given); without it, text and JSON are
/// read as u32 if every value is a non-negative integer, i32 if some are negative, else f32.
pub fn read(path: &Path, format: Format, dtype: Option<DType>) -> Result<Array> {
    let bytes = read_bytes(path)?;
    parse(&bytes, format, dtype).with_context(|| path.display().to_string())
}

/// Reads a 1-D array from `path` (`-` for stdin), as [`parse_vector`] does.
pub fn read_vector(
    path: &Path,
    format: Format,
    dtype: Option<DType>,
    header: Header,
) -> Result<Data> {
    let bytes = read_bytes(path)?;
    parse_vector(&bytes, format, dtype, header).with_context(|| path.display().to_string())
}

/// Reads a matrix from `path` (`-` for stdin); see [`parse_matrix`].
pub fn read_matrix(
    path: &Path,
    format: Format,
    dtype: Option<DType>,
    header: Header,
) -> Result<Array> {
    let bytes = read_bytes(path)?;
    parse_matrix(&bytes, format, dtype, header).with_context(|| path.display().to_string())
}

fn read_bytes(path: &Path) -> Result<Vec<u8>> {
    let mut bytes = Vec::new();
    if path == Path::new("-") {
        std::io::stdin()
            .lock()
            .read_to_end(&mut bytes)
            .context("reading stdin")?;
    } else {
        bytes = std::fs::read(path).with_context(|| format!("{}: cannot read", path.display()))?;
        super::output::note_input(path);
    }
    Ok(bytes)
}

/// Parses a 1-D array: text is one list of numbers however its lines break; .npy and JSON
/// must hold a 1-D array. `header` is how a text file's first line is taken.
pub fn parse_vector(
    bytes: &[u8],
    format: Format,
    dtype: Option<DType>,
    header: Header,
) -> Result<Data> {
    let array = match format {
        Format::Text => parse_text(bytes, dtype, TextShape::Flat, header)?,
        _ => parse(bytes, format, dtype)?,
    };
    if array.shape.len() != 1 {
        bail!("expected a 1-D array, got shape {:?}", array.shape);
    }
    Ok(array.data)
}

/// Parses a 2-D matrix: like [`parse`], except that text is always rows x columns (one line
/// per row: one line is 1 x n, one value per line is n x 1), and that an empty array or one
/// of another rank is an error. `header` is how a text file's first line is taken.
pub fn parse_matrix(
    bytes: &[u8],
    format: Format,
    dtype: Option<DType>,
    header: Header,
) -> Result<Array> {
    let array = match format {
        Format::Text => parse_text(bytes, dtype, TextShape::Rows, header)?,
        _ => parse(bytes, format, dtype)?,
    };
    if array.data.is_empty() {
        bail!("empty matrix (shape {:?})", array.shape);
    }
    if array.shape.len() != 2 {
        bail!("expected a 2-D matrix, got shape {:?}", array.shape);
    }
    Ok(array)
}

/// Parses bytes of a given format; errors do not name the file (the caller adds it).
pub fn parse(bytes: &[u8], format: Format, dtype: Option<DType>) -> Result<Array> {
    match format {
        Format::Npy => parse_npy(bytes, dtype),
        Format::Bin => {
            let dtype =
                dtype.ok_or_else(|| crate::UsageError("raw .bin input needs --dtype".into()))?;
            if !bytes.len().is_multiple_of(dtype.size()) {
                bail!(
                    "{} bytes is not a whole number of {} elements ({} bytes each)",
                    bytes.len(),
                    dtype.name(),
                    dtype.size()
                );
            }
            Ok(Array::vector(Data::from_bytes(dtype, bytes)))
        }
        Format::Json => {
            let value = json::parse(bytes).map_err(|e| anyhow!("not valid JSON: {e}"))?;
            let mut shape = Vec::new();
            let mut flat = Vec::new();
            json_flatten(&value, 0, &mut shape, &mut flat, &mut Vec::new())?;
            if shape.is_empty() {
                bail!("expected a JSON array of numbers");
            }
            Ok(Array {
                data: numbers_to_data(&flat, dtype, |i| {
                    format!("element {}", index_of(i, &shape))
                })?,
                shape,
            })
        }
        Format::Text => parse_text(bytes, dtype, TextShape::Auto, Header::Detect),
    }
}

/// Whether a text file's first line is a header row of column names.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Header {
    /// A first line none of whose fields is a number (`x,y,z`, `"a","b"`) is a header.
    #[default]
    Detect,
    /// The first non-empty line is a header, whatever it holds (`--header`: names such as
    /// `2024,2025`).
    Present,
    /// There is none: every line is data, and a name in it an error (`--no-header`).
    Absent,
}

/// How text lines shape an array.
#[derive(Clone, Copy, PartialEq, Eq)]
enum TextShape {
    /// One line, or one value per line, is a vector; equal rows are a matrix.
    Auto,
    /// Every line is a row of a matrix.
    Rows,
    /// One vector, however the lines break.
    Flat,
}

/// Text: numbers separated by commas or whitespace, shaped by `how`.
/// A field as a message shows it: characters that do not show (controls, and format
/// characters such as a byte order mark or a zero-width space) as U+XXXX.
fn shown(field: &str) -> String {
    let hidden = |c: char| {
        c.is_control()
            || matches!(c, '\u{AD}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}')
            || matches!(c, '\u{2060}'..='\u{2064}' | '\u{FEFF}')
    };
    field
        .chars()
        .map(|c| match hidden(c) {
            true => format!("U+{:04X}", u32::from(c)),
            false => c.to_string(),
        })
        .collect()
}

fn parse_text(bytes: &[u8], dtype: Option<DType>, how: TextShape, header: Header) -> Result<Array> {
    let text = std::str::from_utf8(bytes).map_err(|_| anyhow!("not UTF-8 text"))?;
    // A byte order mark (Excel's "CSV UTF-8", Notepad) is no part of the first value.
    let text = text.strip_prefix('\u{FEFF}').unwrap_or(text);
    let tokens = |line: &str| -> Vec<String> {
        line.split(|c: char| c == ',' || c.is_whitespace())
            .filter(|t| !t.is_empty())
            .map(str::to_owned)
            .collect()
    };
    // A CSV's header row, when detected: a first line none of whose fields is a number
    // (`x,y,z`, `"a","b"`), with data after it. A line with a number among its fields is data,
    // and a bad field in it an error.
    let first = text.lines().position(|l| !tokens(l).is_empty());
    let header = match header {
        Header::Absent => None,
        Header::Present => first,
        Header::Detect => first.filter(|&at| {
            let first = text.lines().nth(at).unwrap_or_default();
            let data_follows = text.lines().skip(at + 1).any(|l| !tokens(l).is_empty());
            data_follows && tokens(first).iter().all(|t| Number::parse(t).is_none())
        }),
    };
    let mut flat = Vec::new();
    let mut rows = Vec::new();
    let mut lines = Vec::new();
    for (lineno, line) in text.lines().enumerate() {
        if Some(lineno) == header {
            continue;
        }
        let before = flat.len();
        for (col, tok) in line
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|t| !t.is_empty())
            .enumerate()
        {
            let v = Number::parse(tok).ok_or_else(|| {
                anyhow!(
                    "line {}, value {}: \"{}\" is not a number",
                    lineno + 1,
                    col + 1,
                    shown(tok)
                )
            })?;
            flat.push(v);
            lines.push((lineno + 1, col + 1));
        }
        if flat.len() > before {
            rows.push(flat.len() - before);
        }
    }
    let matrix = how == TextShape::Rows;
    let shape = if how == TextShape::Flat {
        vec![flat.len()]
    } else if matrix && rows.iter().all(|&r| r == rows[0]) {
        vec![rows.len(), rows.first().copied().unwrap_or(0)]
    } else if !matrix && (rows.len() <= 1 || rows.iter().all(|&r| r == 1)) {
        vec![flat.len()]
    } else if rows.iter().all(|&r| r == rows[0]) {
        vec![rows.len(), rows[0]]
    } else {
        let bad = rows
            .iter()
            .position(|&r| r != rows[0])
            .expect("rows differ");
        bail!(
            "ragged rows: row 1 has {} values but row {} has {}",
            rows[0],
            bad + 1,
            rows[bad]
        );
    };
    Ok(Array {
        data: numbers_to_data(&flat, dtype, |i| {
            format!("line {}, value {}", lines[i].0, lines[i].1)
        })?,
        shape,
    })
}

/// A number as written: integers are kept exact.
#[derive(Clone, Copy, Debug)]
enum Number {
    Int(i128),
    /// An integer literal too large even for i128 (kept as its nearest f64).
    BigInt(f64),
    Float(f64),
}

impl Number {
    /// Parses one number as written in text or JSON: an integer literal (digits with an
    /// optional sign) stays an integer however large; anything else Rust reads as an f64
    /// (`1.5`, `1e-3`, `NaN`, `inf`, `Infinity`, any case).
    fn parse(s: &str) -> Option<Number> {
        let digits = s.strip_prefix(['-', '+']).unwrap_or(s);
        if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
            return Some(match s.parse::<i128>() {
                Ok(i) => Number::Int(i),
                Err(_) => Number::BigInt(s.parse::<f64>().ok()?),
            });
        }
        s.parse::<f64>().ok().map(Number::Float)
    }

    fn is_int(&self) -> bool {
        !matches!(self, Number::Float(_))
    }

    fn as_f64(&self) -> f64 {
        match *self {
            Number::Int(v) => v as f64,
            Number::BigInt(f) | Number::Float(f) => f,
        }
    }

    /// The integer, if it lies in `lo..=hi`.
    fn int_in(&self, lo: i128, hi: i128) -> Option<i128> {
        match *self {
            Number::Int(v) if (lo..=hi).contains(&v) => Some(v),
            _ => None,
        }
    }
}

impl std::fmt::Display for Number {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match self {
            Number::Int(v) => write!(f, "{v}"),
            // Very large and very small magnitudes in exponent form (1e300, not 301 digits).
            Number::BigInt(v) | Number::Float(v)
                if v.is_finite() && *v != 0.0 && !(1e-4..1e16).contains(&v.abs()) =>
            {
                write!(f, "{v:e}")
            }
            Number::BigInt(v) | Number::Float(v) => write!(f, "{v}"),
        }
    }
}

/// The index of the `flat`-th stored element: C order, or Fortran order (first axis fastest).
fn index_of_stored(flat: usize, shape: &[usize], fortran: bool) -> String {
    if !fortran {
        return index_of(flat, shape);
    }
    let reversed: Vec<usize> = shape.iter().rev().copied().collect();
    let mut idx = index_of_parts(flat, &reversed);
    idx.reverse();
    format!("{idx:?}")
}

fn index_of_parts(flat: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    let mut rest = flat;
    for (d, &n) in shape.iter().enumerate().rev() {
        if n > 0 {
            idx[d] = rest % n;
            rest /= n;
        }
    }
    idx
}

fn index_of(flat: usize, shape: &[usize]) -> String {
    format!("{:?}", index_of_parts(flat, shape))
}

fn json_flatten(
    v: &json::Value,
    depth: usize,
    shape: &mut Vec<usize>,
    flat: &mut Vec<Number>,
    path: &mut Vec<usize>,
) -> Result<()> {
    match v {
        json::Value::Array(items) => {
            if shape.len() == depth {
                if !flat.is_empty() {
                    bail!("ragged nesting at element {path:?}");
                }
                shape.push(items.len());
            } else if shape.len() < depth || shape[depth] != items.len() {
                bail!(
                    "ragged rows: element {path:?} has {} values, expected {}",
                    items.len(),
                    shape.get(depth).copied().unwrap_or(0)
                );
            }
            for (i, item) in items.iter().enumerate() {
                path.push(i);
                json_flatten(item, depth + 1, shape, flat, path)?;
                path.pop();
            }
            Ok(())
        }
        json::Value::Number(n) => {
            if shape.len() != depth {
                bail!("ragged nesting at element {path:?}");
            }
            flat.push(*n);
            Ok(())
        }
        json::Value::Other(what) => bail!("element {path:?} is not a number: {what}"),
    }
}

/// Converts numbers to `dtype`, or without one infers it: u32 when every number is an
/// integer in u32's range, i32 when every one is in i32's, f32 when some are not integers. An
/// integer array that fits neither is refused (it never turns into floats silently).
fn numbers_to_data(
    nums: &[Number],
    dtype: Option<DType>,
    at: impl Fn(usize) -> String,
) -> Result<Data> {
    values_to_data(nums.len(), |i| nums[i], dtype, at)
}

/// [`numbers_to_data`] over `len` values that `get` gives one at a time (a .npy's elements
/// are converted without a copy of them all as [`Number`]s). An integer becomes a float only
/// where the float holds it exactly; a float becomes an integer only where it is one.
fn values_to_data(
    len: usize,
    get: impl Fn(usize) -> Number,
    dtype: Option<DType>,
    at: impl Fn(usize) -> String,
) -> Result<Data> {
    let (u32_max, i32_min, i32_max) = (u32::MAX as i128, i32::MIN as i128, i32::MAX as i128);
    let dtype = match dtype {
        Some(d) => d,
        None if (0..len).all(|i| get(i).int_in(0, u32_max).is_some()) => DType::U32,
        None if (0..len).all(|i| get(i).int_in(i32_min, i32_max).is_some()) => DType::I32,
        None if (0..len).all(|i| get(i).is_int()) => {
            let neg = (0..len).any(|i| get(i).as_f64() < 0.0);
            let (lo, hi) = if neg {
                (i32_min, i32_max)
            } else {
                (0, u32_max)
            };
            let i = (0..len)
                .position(|i| get(i).int_in(lo, hi).is_none())
                .expect("some integer is out of range");
            let range = match (neg, get(i).as_f64() > 0.0) {
                (false, _) => "u32",
                (true, false) => "i32",
                // It would fit u32, but the negative values need i32.
                (true, true) => "u32 or i32",
            };
            bail!(
                "{}: {} does not fit {range} (the integer types gpukit takes); \
                 give --dtype f32 to read the values as floats",
                at(i),
                get(i)
            )
        }
        None => DType::F32,
    };
    let int = |i: usize, lo: i128, hi: i128| -> Result<i128> {
        match get(i) {
            n @ (Number::Int(_) | Number::BigInt(_)) => n
                .int_in(lo, hi)
                .ok_or_else(|| anyhow!("{}: {n} does not fit {}", at(i), dtype.name())),
            // A float with no fraction is that integer (numpy's float arrays of counts).
            Number::Float(f) if f.is_finite() && f.fract() == 0.0 => Number::Int(f as i128)
                .int_in(lo, hi)
                .ok_or_else(|| anyhow!("{}: {} does not fit {}", at(i), get(i), dtype.name())),
            Number::Float(f) => bail!("{}: {f:?} is not an integer ({})", at(i), dtype.name()),
        }
    };
    Ok(match dtype {
        DType::U32 => Data::U32(
            (0..len)
                .map(|i| int(i, 0, u32_max).map(|v| v as u32))
                .collect::<Result<_>>()?,
        ),
        DType::I32 => Data::I32(
            (0..len)
                .map(|i| int(i, i32_min, i32_max).map(|v| v as i32))
                .collect::<Result<_>>()?,
        ),
        // A finite value past f32's largest would become infinite: refused, as an integer
        // past u32 is (an infinite literal, or one past f64's range, stays infinite).
        DType::F32 => Data::F32(
            (0..len)
                .map(|i| {
                    let n = get(i);
                    let (v, f) = (n.as_f64(), n.as_f64() as f32);
                    if v.is_finite() && f.is_infinite() {
                        bail!(
                            "{}: {} is outside float32's range (largest magnitude {:e})",
                            at(i),
                            n,
                            f32::MAX
                        );
                    }
                    if let Number::Int(int) = n {
                        if f as i128 != int {
                            bail!(
                                "{}: {int} is not exactly a float32 (the nearest is {f})",
                                at(i)
                            );
                        }
                    }
                    Ok(f)
                })
                .collect::<Result<_>>()?,
        ),
        DType::F16 => Data::F16((0..len).map(|i| f16::from_f64(get(i).as_f64())).collect()),
    })
}

/// A .npy dtype no reader takes; each command says which ones it does take.
#[derive(Debug)]
pub struct UnsupportedDtype(pub String);

impl std::fmt::Display for UnsupportedDtype {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "dtype {} is not supported", self.0)
    }
}

impl std::error::Error for UnsupportedDtype {}

/// Rephrases an [`UnsupportedDtype`] anywhere in `err` as `PATH: dtype D is not supported by
/// OP (TAKES)`; other errors pass unchanged.
pub fn name_dtypes(err: anyhow::Error, path: &Path, op: &str, takes: &str) -> anyhow::Error {
    match err
        .chain()
        .find_map(|e| e.downcast_ref::<UnsupportedDtype>())
    {
        Some(d) => anyhow!(
            "{}: dtype {} is not supported by {op} ({takes})",
            path.display(),
            d.0
        ),
        None => err,
    }
}

/// An element type of a .npy file, from its header's `descr` (`<i8`, `|b1`, `>f4`, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum NpyElem {
    Bool,
    Int { bytes: usize, signed: bool },
    Float { bytes: usize },
}

impl NpyElem {
    /// The element type and whether it is stored big-endian; None for what is no real number
    /// (complex, strings, objects, dates).
    fn parse(descr: &str) -> Option<(NpyElem, bool)> {
        let (order, code) = descr.split_at_checked(1)?;
        let big = match order {
            "<" | "|" | "=" => false,
            ">" => true,
            _ => return None,
        };
        let (kind, bytes) = code.split_at_checked(1)?;
        let bytes: usize = bytes.parse().ok()?;
        let elem = match (kind, bytes) {
            ("b", 1) => NpyElem::Bool,
            ("u", 1 | 2 | 4 | 8) => NpyElem::Int {
                bytes,
                signed: false,
            },
            ("i", 1 | 2 | 4 | 8) => NpyElem::Int {
                bytes,
                signed: true,
            },
            ("f", 2 | 4 | 8) => NpyElem::Float { bytes },
            _ => return None,
        };
        Some((elem, big && bytes > 1))
    }

    fn size(self) -> usize {
        match self {
            NpyElem::Bool => 1,
            NpyElem::Int { bytes, .. } | NpyElem::Float { bytes } => bytes,
        }
    }

    /// The dtype gpukit holds these elements in as they are, with no conversion.
    fn native(self) -> Option<DType> {
        match self {
            NpyElem::Int {
                bytes: 4,
                signed: false,
            } => Some(DType::U32),
            NpyElem::Int {
                bytes: 4,
                signed: true,
            } => Some(DType::I32),
            NpyElem::Float { bytes: 4 } => Some(DType::F32),
            NpyElem::Float { bytes: 2 } => Some(DType::F16),
            _ => None,
        }
    }

    /// The element at the start of `b` (little-endian unless `big`).
    fn get(self, b: &[u8], big: bool) -> Number {
        let mut le = [0u8; 8];
        let n = self.size();
        le[..n].copy_from_slice(&b[..n]);
        if big {
            le[..n].reverse();
        }
        let bits = u64::from_le_bytes(le);
        match self {
            NpyElem::Bool => Number::Int(i128::from(bits != 0)),
            NpyElem::Int {
                bytes,
                signed: false,
            } => Number::Int(i128::from(bits & (u64::MAX >> (64 - 8 * bytes)))),
            NpyElem::Int {
                bytes,
                signed: true,
            } => {
                // Sign-extend from the element's width.
                let shift = 64 - 8 * bytes;
                Number::Int(i128::from(((bits << shift) as i64) >> shift))
            }
            NpyElem::Float { bytes: 2 } => Number::Float(f16::from_bits(bits as u16).to_f64()),
            NpyElem::Float { bytes: 4 } => Number::Float(f64::from(f32::from_bits(bits as u32))),
            NpyElem::Float { .. } => Number::Float(f64::from_bits(bits)),
        }
    }
}

/// A .npy file of any real dtype numpy writes (bool, int8..int64, uint8..uint64,
/// float16..float64; either byte order; C or Fortran order). Elements gpukit holds as they
/// are (little-endian u4, i4, f4, f2) are taken as they are unless `want` differs; others are
/// converted to `want`, or without it integers and bools to u32 or i32 (as text is) and floats
/// to f32, each value checked to fit (an integer exactly, a float within range).
fn parse_npy(bytes: &[u8], want: Option<DType>) -> Result<Array> {
    let header = npy::Header::parse(bytes).map_err(|e| anyhow!("not a valid .npy file: {e}"))?;
    let reader = &bytes[header.data_offset..];
    let descr = header.descr.as_str();
    let (elem, big) =
        NpyElem::parse(descr).ok_or_else(|| anyhow!(UnsupportedDtype(descr.to_string())))?;
    let shape = header
        .shape
        .iter()
        .map(|&d| usize::try_from(d).ok())
        .collect::<Option<Vec<usize>>>()
        .ok_or_else(|| anyhow!("shape {:?} is too large for this machine", header.shape))?;
    // Every size computed from the header is checked: a hostile shape must not wrap around.
    let need = shape
        .iter()
        .try_fold(elem.size(), |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| {
            anyhow!(
                "shape {shape:?} of {} elements overflows (the file holds {} bytes of data)",
                elem.native()
                    .map_or(descr.to_owned(), |d| d.name().to_owned()),
                reader.len()
            )
        })?;
    if reader.len() < need {
        bail!(
            "truncated .npy data: {} bytes where shape {shape:?} needs {need}",
            reader.len()
        );
    }
    let raw = &reader[..need];
    let data = match (elem.native(), big, want) {
        (Some(native), false, None) => Data::from_bytes(native, raw),
        (Some(native), false, Some(w)) if w == native => Data::from_bytes(native, raw),
        _ => {
            let to = want.or(elem.native()).or(match elem {
                NpyElem::Float { .. } => Some(DType::F32),
                // Integers and bools: u32 or i32 as they fit, as text is read.
                _ => None,
            });
            let size = elem.size();
            values_to_data(
                need / size,
                |i| elem.get(&raw[i * size..], big),
                to,
                |i| {
                    format!(
                        "element {}",
                        index_of_stored(i, &shape, header.fortran_order)
                    )
                },
            )?
        }
    };
    let data = if header.fortran_order && shape.len() > 1 {
        fortran_to_c(data, &shape)
    } else {
        data
    };
    Ok(Array { shape, data })
}

fn fortran_to_c(data: Data, shape: &[usize]) -> Data {
    fn permute<T: Copy>(v: &[T], shape: &[usize]) -> Vec<T> {
        let n = v.len();
        let mut out = Vec::with_capacity(n);
        let mut idx = vec![0usize; shape.len()];
        for _ in 0..n {
            // Fortran offset of the C-order index idx.
            let mut off = 0;
            let mut stride = 1;
            for (d, &i) in idx.iter().enumerate() {
                off += i * stride;
                stride *= shape[d];
            }
            out.push(v[off]);
            for d in (0..shape.len()).rev() {
                idx[d] += 1;
                if idx[d] < shape[d] {
                    break;
                }
                idx[d] = 0;
            }
        }
        out
    }
    match data {
        Data::U32(v) => Data::U32(permute(&v, shape)),
        Data::I32(v) => Data::I32(permute(&v, shape)),
        Data::F32(v) => Data::F32(permute(&v, shape)),
        Data::F16(v) => Data::F16(permute(&v, shape)),
    }
}

/// Writes `array` to `path` (atomically) or to stdout for `-`.
pub fn write(path: &Path, format: Format, array: &Array) -> Result<()> {
    if path == Path::new("-") {
        let mut out = std::io::stdout().lock();
        encode(&mut out, format, array)?;
        out.flush()?;
        return Ok(());
    }
    PendingFile::create(path)?.commit_with(|w| encode(w, format, array))
}

/// Encodes `array` in `format`.
pub fn encode(w: &mut dyn Write, format: Format, array: &Array) -> Result<()> {
    match format {
        Format::Npy => {
            let shape = match array.shape.as_slice() {
                [n] => format!("({n},)"),
                dims => format!(
                    "({})",
                    dims.iter()
                        .map(|d| d.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            };
            let mut dict = format!(
                "{{'descr': '{}', 'fortran_order': False, 'shape': {shape}, }}",
                array.data.dtype().npy_descr()
            );
            // Magic (6) + version (2) + length (2) + dict + '\n' is a multiple of 64.
            let total = (10 + dict.len() + 1).next_multiple_of(64);
            dict.push_str(&" ".repeat(total - 10 - dict.len() - 1));
            dict.push('\n');
            w.write_all(b"\x93NUMPY\x01\x00")?;
            w.write_all(&(dict.len() as u16).to_le_bytes())?;
            w.write_all(dict.as_bytes())?;
            w.write_all(array.data.bytes())?;
        }
        Format::Bin => w.write_all(array.data.bytes())?,
        Format::Json => {
            let cols = if array.shape.len() == 2 {
                array.shape[1]
            } else {
                0
            };
            if array.shape.len() == 2 {
                w.write_all(b"[\n")?;
                for r in 0..array.shape[0] {
                    w.write_all(b"  [")?;
                    write_row(w, &array.data, r * cols, cols, ", ")?;
                    w.write_all(if r + 1 < array.shape[0] {
                        b"],\n"
                    } else {
                        b"]\n"
                    })?;
                }
                w.write_all(b"]\n")?;
            } else {
                w.write_all(b"[")?;
                write_row(w, &array.data, 0, array.data.len(), ", ")?;
                w.write_all(b"]\n")?;
            }
        }
        Format::Text => {
            if array.shape.len() == 2 {
                let cols = array.shape[1];
                for r in 0..array.shape[0] {
                    write_row(w, &array.data, r * cols, cols, ",")?;
                    w.write_all(b"\n")?;
                }
            } else {
                for i in 0..array.data.len() {
                    write_row(w, &array.data, i, 1, "")?;
                    w.write_all(b"\n")?;
                }
            }
        }
    }
    Ok(())
}

/// Writes `len` elements from `start`, separated by `sep`. Floats use the shortest text that
/// reads back to the same value. Non-finite floats are written `NaN`, `Infinity`, `-Infinity`
/// (what Python's `json` module, JavaScript's `Number` and numpy's text readers take; strict
/// JSON has no spelling for them), in text and JSON alike.
fn write_row(w: &mut dyn Write, data: &Data, start: usize, len: usize, sep: &str) -> Result<()> {
    let float = |w: &mut dyn Write, f: f32| -> std::io::Result<()> {
        match f {
            f if f.is_nan() => w.write_all(b"NaN"),
            f32::INFINITY => w.write_all(b"Infinity"),
            f32::NEG_INFINITY => w.write_all(b"-Infinity"),
            f => write!(w, "{f:?}"),
        }
    };
    for i in start..start + len {
        if i > start {
            w.write_all(sep.as_bytes())?;
        }
        match data {
            Data::U32(v) => write!(w, "{}", v[i])?,
            Data::I32(v) => write!(w, "{}", v[i])?,
            Data::F32(v) => float(w, v[i])?,
            Data::F16(v) => float(w, v[i].to_f32())?,
        }
    }
    Ok(())
}

/// The .npy header (format versions 1 to 3): the magic, the header's length, and a Python
/// dict literal with `descr`, `fortran_order` and `shape`. Read here rather than by a generic
/// reader so that nothing computed from it can overflow.
mod npy {
    pub struct Header {
        pub descr: String,
        pub fortran_order: bool,
        pub shape: Vec<u64>,
        /// Where the data starts.
        pub data_offset: usize,
    }

    impl Header {
        pub fn parse(bytes: &[u8]) -> Result<Header, String> {
            let rest = bytes
                .strip_prefix(b"\x93NUMPY")
                .ok_or("no \\x93NUMPY magic at the start")?;
            let (len, start) = match rest {
                [1, _, a, b, ..] => (u16::from_le_bytes([*a, *b]) as usize, 10usize),
                [2 | 3, _, a, b, c, d, ..] => (u32::from_le_bytes([*a, *b, *c, *d]) as usize, 12),
                [v, ..] => return Err(format!("unknown format version {v}")),
                [] => return Err("truncated header".into()),
            };
            let end = start
                .checked_add(len)
                .filter(|&e| e <= bytes.len())
                .ok_or("truncated header")?;
            let text = std::str::from_utf8(&bytes[start..end]).map_err(|_| "header is not text")?;
            let mut p = Dict {
                s: text.as_bytes(),
                pos: 0,
            };
            let (mut descr, mut fortran_order, mut shape) = (None, None, None);
            p.expect(b'{')?;
            loop {
                p.ws();
                if p.peek() == Some(b'}') {
                    break;
                }
                let key = p.string()?;
                p.expect(b':')?;
                p.ws();
                match key.as_str() {
                    "descr" => descr = Some(p.string()?),
                    "fortran_order" => fortran_order = Some(p.boolean()?),
                    "shape" => shape = Some(p.tuple()?),
                    other => return Err(format!("unexpected key {other:?} in the header")),
                }
                p.ws();
                match p.peek() {
                    Some(b',') => p.pos += 1,
                    Some(b'}') => {}
                    _ => return Err("malformed header dict".into()),
                }
            }
            let missing = |k: &str| format!("the header has no {k:?}");
            Ok(Header {
                descr: descr.ok_or_else(|| missing("descr"))?,
                fortran_order: fortran_order.ok_or_else(|| missing("fortran_order"))?,
                shape: shape.ok_or_else(|| missing("shape"))?,
                data_offset: end,
            })
        }
    }

    struct Dict<'a> {
        s: &'a [u8],
        pos: usize,
    }

    impl Dict<'_> {
        fn peek(&self) -> Option<u8> {
            self.s.get(self.pos).copied()
        }

        fn ws(&mut self) {
            while self.peek().is_some_and(|b| b.is_ascii_whitespace()) {
                self.pos += 1;
            }
        }

        fn expect(&mut self, c: u8) -> Result<(), String> {
            self.ws();
            if self.peek() != Some(c) {
                return Err(format!("malformed header dict: expected '{}'", c as char));
            }
            self.pos += 1;
            Ok(())
        }

        fn string(&mut self) -> Result<String, String> {
            let quote = self.peek().filter(|q| matches!(q, b'\'' | b'"'));
            let quote = quote.ok_or("malformed header dict: expected a string")?;
            let start = self.pos + 1;
            let len = self.s[start..]
                .iter()
                .position(|&b| b == quote)
                .ok_or("malformed header dict: unterminated string")?;
            self.pos = start + len + 1;
            Ok(String::from_utf8_lossy(&self.s[start..start + len]).into_owned())
        }

        fn boolean(&mut self) -> Result<bool, String> {
            for (word, v) in [(&b"True"[..], true), (b"False", false)] {
                if self.s[self.pos..].starts_with(word) {
                    self.pos += word.len();
                    return Ok(v);
                }
            }
            Err("malformed header dict: fortran_order is not True or False".into())
        }

        fn tuple(&mut self) -> Result<Vec<u64>, String> {
            self.expect(b'(')?;
            let mut dims = Vec::new();
            loop {
                self.ws();
                if self.peek() == Some(b')') {
                    self.pos += 1;
                    return Ok(dims);
                }
                let start = self.pos;
                while self.peek().is_some_and(|b| b.is_ascii_digit()) {
                    self.pos += 1;
                }
                let digits = std::str::from_utf8(&self.s[start..self.pos]).unwrap_or("");
                let dim = digits
                    .parse::<u64>()
                    .map_err(|_| "malformed shape: expected a size".to_string())?;
                dims.push(dim);
                if self.peek() == Some(b'L') {
                    self.pos += 1; // Python 2's long suffix
                }
                self.ws();
                match self.peek() {
                    Some(b',') => self.pos += 1,
                    Some(b')') => {}
                    _ => return Err("malformed shape: expected ',' or ')'".into()),
                }
            }
        }
    }
}

/// A JSON reader for arrays of numbers. Beside standard JSON it reads the non-finite floats
/// that gpukit and Python's `json` module write (`NaN`, `Infinity`, `-Infinity`, and the
/// `nan`, `inf`, `-inf` of gpukit 0.1), and keeps integer literals exact however large (a
/// generic JSON parser turns integers past 2^64 into floats).
mod json {
    use super::Number;

    pub enum Value {
        Array(Vec<Value>),
        Number(Number),
        /// Any other JSON value, described ("a string", "null", ...).
        Other(&'static str),
    }

    /// Nesting deeper than this is refused (a guard against stack exhaustion).
    const MAX_DEPTH: usize = 64;

    pub fn parse(bytes: &[u8]) -> Result<Value, String> {
        let mut p = Parser { bytes, pos: 0 };
        p.skip_ws();
        let v = p.value(0)?;
        p.skip_ws();
        if p.pos < bytes.len() {
            return Err(p.error("trailing characters"));
        }
        Ok(v)
    }

    struct Parser<'a> {
        bytes: &'a [u8],
        pos: usize,
    }

    impl Parser<'_> {
        fn error(&self, what: &str) -> String {
            let before = &self.bytes[..self.pos.min(self.bytes.len())];
            let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
            let column = before.iter().rev().take_while(|&&b| b != b'\n').count() + 1;
            format!("{what} at line {line} column {column}")
        }

        fn skip_ws(&mut self) {
            while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.bytes.get(self.pos) {
                self.pos += 1;
            }
        }

        fn value(&mut self, depth: usize) -> Result<Value, String> {
            if depth > MAX_DEPTH {
                return Err(self.error("nested too deeply"));
            }
            match self.bytes.get(self.pos) {
                None => Err(self.error("EOF while parsing a value")),
                Some(b'[') => {
                    self.pos += 1;
                    let mut items = Vec::new();
                    self.list(b']', |p| {
                        items.push(p.value(depth + 1)?);
                        Ok(())
                    })?;
                    Ok(Value::Array(items))
                }
                Some(b'{') => {
                    self.pos += 1;
                    self.list(b'}', |p| {
                        p.string()?;
                        p.skip_ws();
                        if p.bytes.get(p.pos) != Some(&b':') {
                            return Err(p.error("expected ':'"));
                        }
                        p.pos += 1;
                        p.skip_ws();
                        p.value(depth + 1).map(drop)
                    })?;
                    Ok(Value::Other("an object"))
                }
                Some(b'"') => {
                    self.string()?;
                    Ok(Value::Other("a string"))
                }
                Some(_) => {
                    let start = self.pos;
                    while let Some(b) = self.bytes.get(self.pos) {
                        if !(b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.')) {
                            break;
                        }
                        self.pos += 1;
                    }
                    let word = std::str::from_utf8(&self.bytes[start..self.pos]).unwrap_or("");
                    match word {
                        "null" => return Ok(Value::Other("null")),
                        "true" | "false" => return Ok(Value::Other("a boolean")),
                        _ => {}
                    }
                    let lower = word.to_ascii_lowercase();
                    let name = lower.trim_start_matches('-');
                    let named = matches!(name, "nan" | "inf" | "infinity");
                    if named && (word == "-NaN" || word == "-nan") {
                        // Neither Python nor gpukit writes a negative NaN.
                        self.pos = start;
                        return Err(self.error("expected value"));
                    }
                    match Number::parse(word) {
                        Some(n) if named || json_number(word) => Ok(Value::Number(n)),
                        _ => {
                            self.pos = start;
                            Err(self.error("expected value"))
                        }
                    }
                }
            }
        }

        /// Items separated by commas up to `close`; the opening bracket is consumed.
        fn list(
            &mut self,
            close: u8,
            mut item: impl FnMut(&mut Self) -> Result<(), String>,
        ) -> Result<(), String> {
            self.skip_ws();
            if self.bytes.get(self.pos) == Some(&close) {
                self.pos += 1;
                return Ok(());
            }
            loop {
                self.skip_ws();
                item(self)?;
                self.skip_ws();
                match self.bytes.get(self.pos) {
                    Some(b',') => self.pos += 1,
                    Some(&c) if c == close => {
                        self.pos += 1;
                        return Ok(());
                    }
                    None => return Err(self.error("EOF while parsing a list")),
                    Some(_) => {
                        return Err(self.error(&format!("expected ',' or '{}'", close as char)))
                    }
                }
            }
        }

        fn string(&mut self) -> Result<(), String> {
            if self.bytes.get(self.pos) != Some(&b'"') {
                return Err(self.error("expected a string"));
            }
            self.pos += 1;
            loop {
                match self.bytes.get(self.pos) {
                    None => return Err(self.error("EOF while parsing a string")),
                    Some(b'"') => {
                        self.pos += 1;
                        return Ok(());
                    }
                    Some(b'\\') => self.pos += 2,
                    Some(_) => self.pos += 1,
                }
            }
        }
    }

    /// Whether `s` follows JSON's number grammar: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
    fn json_number(s: &str) -> bool {
        let b = s.as_bytes();
        let mut i = usize::from(b.first() == Some(&b'-'));
        let digits = |i: &mut usize| {
            let start = *i;
            while b.get(*i).is_some_and(u8::is_ascii_digit) {
                *i += 1;
            }
            *i - start
        };
        let int_start = i;
        let n = digits(&mut i);
        if n == 0 || (n > 1 && b[int_start] == b'0') {
            return false;
        }
        if b.get(i) == Some(&b'.') {
            i += 1;
            if digits(&mut i) == 0 {
                return false;
            }
        }
        if matches!(b.get(i), Some(b'e' | b'E')) {
            i += 1;
            if matches!(b.get(i), Some(b'+' | b'-')) {
                i += 1;
            }
            if digits(&mut i) == 0 {
                return false;
            }
        }
        i == b.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip(format: Format, a: &Array) -> Array {
        let mut buf = Vec::new();
        encode(&mut buf, format, a).unwrap();
        parse(&buf, format, Some(a.data.dtype())).unwrap()
    }

    #[test]
    fn every_format_round_trips_vectors_and_matrices() {
        let v = Array::vector(Data::I32(vec![-3, 0, 7, i32::MAX, i32::MIN]));
        let m = Array {
            shape: vec![2, 3],
            data: Data::F32(vec![1.5, -0.1, 3.0, 1e-30, 2.5e10, 0.0]),
        };
        for f in [Format::Npy, Format::Json, Format::Text, Format::Bin] {
            assert_eq!(roundtrip(f, &v), v, "{f:?}");
            if f != Format::Bin {
                assert_eq!(roundtrip(f, &m), m, "{f:?}");
            }
        }
        let h = Array::vector(Data::F16(vec![f16::from_f32(0.5), f16::from_f32(-2.0)]));
        assert_eq!(roundtrip(Format::Npy, &h), h);
    }

    #[test]
    fn npy_header_is_64_byte_aligned_and_numpy_shaped() {
        let mut buf = Vec::new();
        encode(&mut buf, Format::Npy, &Array::vector(Data::U32(vec![1, 2]))).unwrap();
        let hlen = u16::from_le_bytes([buf[8], buf[9]]) as usize;
        assert_eq!((10 + hlen) % 64, 0);
        let dict = std::str::from_utf8(&buf[10..10 + hlen]).unwrap();
        assert!(
            dict.starts_with("{'descr': '<u4', 'fortran_order': False, 'shape': (2,), }"),
            "{dict}"
        );
        assert_eq!(&buf[10 + hlen..], &[1, 0, 0, 0, 2, 0, 0, 0]);
    }

    #[test]
    fn fortran_order_npy_is_transposed_to_c_order() {
        // numpy: np.asfortranarray(np.arange(6, dtype='<f4').reshape(2, 3)) stores 0 3 1 4 2 5.
        let dict = "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }";
        let mut buf = b"\x93NUMPY\x01\x00".to_vec();
        let pad = (10 + dict.len() + 1).next_multiple_of(64) - 10 - dict.len() - 1;
        let header = format!("{dict}{}\n", " ".repeat(pad));
        buf.extend((header.len() as u16).to_le_bytes());
        buf.extend(header.as_bytes());
        for v in [0f32, 3.0, 1.0, 4.0, 2.0, 5.0] {
            buf.extend(v.to_le_bytes());
        }
        let a = parse(&buf, Format::Npy, None).unwrap();
        assert_eq!(a.shape, vec![2, 3]);
        assert_eq!(a.data, Data::F32(vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0]));
    }

    #[test]
    fn a_csv_header_row_is_skipped_and_a_bad_field_is_not() {
        let a = parse_matrix(b"x,y\n1,2\n3,4\n", Format::Text, None, Header::Detect).unwrap();
        assert_eq!((a.shape, a.data), (vec![2, 2], Data::U32(vec![1, 2, 3, 4])));
        let a = parse(b"\"value\"\n1.5\n2\n", Format::Text, None).unwrap();
        assert_eq!(a.data, Data::F32(vec![1.5, 2.0]));
        // Data lines' errors keep their line numbers; a field that is not a number among
        // numbers is an error, and so is a file of words alone.
        let e = parse(b"x,y\n1,2\n3,z\n", Format::Text, None).unwrap_err();
        assert_eq!(e.to_string(), "line 3, value 2: \"z\" is not a number");
        let e = parse(b"x3,1,2\n4,5,6\n", Format::Text, None).unwrap_err();
        assert_eq!(e.to_string(), "line 1, value 1: \"x3\" is not a number");
        let e = parse(b"hello\n", Format::Text, None).unwrap_err();
        assert_eq!(e.to_string(), "line 1, value 1: \"hello\" is not a number");
    }

    #[test]
    fn a_byte_order_mark_is_no_part_of_the_first_value() {
        // As Excel's "CSV UTF-8" and Notepad write it: the first value was dropped as a header.
        let bom = b"\xEF\xBB\xBF1\n2\n";
        let a = parse(bom, Format::Text, None).unwrap();
        assert_eq!((a.shape, a.data), (vec![2], Data::U32(vec![1, 2])));
        let a = parse_matrix(
            b"\xEF\xBB\xBF1,2\n3,4\n",
            Format::Text,
            None,
            Header::Detect,
        )
        .unwrap();
        assert_eq!((a.shape, a.data), (vec![2, 2], Data::U32(vec![1, 2, 3, 4])));
        let a = parse(b"\xEF\xBB\xBFx,y\n1,2\n", Format::Text, None).unwrap();
        assert_eq!(a.data, Data::U32(vec![1, 2]));
        // One elsewhere is shown by its code point, not as a Rust escape.
        let e = parse(b"1,\xEF\xBB\xBF2\n", Format::Text, None).unwrap_err();
        assert_eq!(
            e.to_string(),
            "line 1, value 2: \"U+FEFF2\" is not a number"
        );
    }

    #[test]
    fn a_header_can_be_named_present_or_absent() {
        // Column names that are numbers (years) are data to detection, a header when told.
        let text = b"2024,2025\n1,2\n3,4\n";
        let a = parse_matrix(text, Format::Text, None, Header::Detect).unwrap();
        assert_eq!(a.shape, vec![3, 2]);
        let a = parse_matrix(text, Format::Text, None, Header::Present).unwrap();
        assert_eq!((a.shape, a.data), (vec![2, 2], Data::U32(vec![1, 2, 3, 4])));
        // The header is the first non-empty line, and only it.
        let v = parse_vector(b"\nsum\n5\n6\n", Format::Text, None, Header::Present).unwrap();
        assert_eq!(v, Data::U32(vec![5, 6]));
        // Told there is none, a line of names is an error naming its line.
        let e = parse_vector(b"x,y\n1,2\n", Format::Text, None, Header::Absent).unwrap_err();
        assert_eq!(e.to_string(), "line 1, value 1: \"x\" is not a number");
        // Binary and JSON formats have no header rows: the setting does not touch them.
        let v = parse_vector(b"[7, 8]", Format::Json, None, Header::Present).unwrap();
        assert_eq!(v, Data::U32(vec![7, 8]));
    }

    #[test]
    fn bad_inputs_say_where() {
        let e = parse(b"1, 2, x3", Format::Text, None).unwrap_err();
        assert_eq!(e.to_string(), "line 1, value 3: \"x3\" is not a number");
        let e = parse(b"[1, 4294967296]", Format::Json, Some(DType::U32)).unwrap_err();
        assert_eq!(e.to_string(), "element [1]: 4294967296 does not fit u32");
        let e = parse(b"[[1, 2], [3]]", Format::Json, None).unwrap_err();
        assert!(e.to_string().contains("ragged"), "{e}");
        let e = parse(b"1,2\n3\n", Format::Text, None).unwrap_err();
        assert!(e.to_string().contains("ragged rows"), "{e}");
        let e = parse(&[0u8; 7], Format::Bin, Some(DType::U32)).unwrap_err();
        assert!(e.to_string().contains("7 bytes"), "{e}");
        let e = parse(b"[1, 2", Format::Json, None).unwrap_err();
        assert!(e.to_string().starts_with("not valid JSON"), "{e}");
    }

    #[test]
    fn matrices_take_text_lines_as_rows_and_refuse_other_ranks() {
        let one_row = parse_matrix(b"1,2,3\n", Format::Text, None, Header::Detect).unwrap();
        assert_eq!(one_row.shape, vec![1, 3]);
        let one_col =
            parse_matrix(b"1\n2\n", Format::Text, Some(DType::F32), Header::Detect).unwrap();
        assert_eq!(one_col.shape, vec![2, 1]);
        assert_eq!(one_col.data, Data::F32(vec![1.0, 2.0]));
        let e = parse_matrix(b"[1, 2, 3, 4, 5]", Format::Json, None, Header::Detect).unwrap_err();
        assert_eq!(e.to_string(), "expected a 2-D matrix, got shape [5]");
        let e = parse_matrix(b"[[[1]]]", Format::Json, None, Header::Detect).unwrap_err();
        assert_eq!(e.to_string(), "expected a 2-D matrix, got shape [1, 1, 1]");
        let e = parse_matrix(b"\n", Format::Text, None, Header::Detect).unwrap_err();
        assert_eq!(e.to_string(), "empty matrix (shape [0, 0])");
        let e = parse_matrix(b"[[], []]", Format::Json, None, Header::Detect).unwrap_err();
        assert_eq!(e.to_string(), "empty matrix (shape [2, 0])");
        let e = parse_matrix(b"1,2\n3\n", Format::Text, None, Header::Detect).unwrap_err();
        assert!(e.to_string().contains("ragged rows"), "{e}");
    }

    #[test]
    fn vectors_take_any_text_lines_but_only_1d_npy_and_json() {
        let v = parse_vector(b"1 2 3\n4, 5\n\n6\n", Format::Text, None, Header::Detect).unwrap();
        assert_eq!(v, Data::U32(vec![1, 2, 3, 4, 5, 6]));
        let e = parse_vector(b"1 2\n3 x", Format::Text, None, Header::Detect).unwrap_err();
        assert_eq!(e.to_string(), "line 2, value 2: \"x\" is not a number");
        let e = parse_vector(b"[[1, 2], [3, 4]]", Format::Json, None, Header::Detect).unwrap_err();
        assert_eq!(e.to_string(), "expected a 1-D array, got shape [2, 2]");
        let mut npy = Vec::new();
        let m = Array {
            shape: vec![1, 2],
            data: Data::I32(vec![1, 2]),
        };
        encode(&mut npy, Format::Npy, &m).unwrap();
        let e = parse_vector(&npy, Format::Npy, None, Header::Detect).unwrap_err();
        assert_eq!(e.to_string(), "expected a 1-D array, got shape [1, 2]");
    }

    #[test]
    fn text_and_json_infer_dtype() {
        assert_eq!(
            parse(b"1 2 3", Format::Text, None).unwrap().data.dtype(),
            DType::U32
        );
        assert_eq!(
            parse(b"1\n-2\n", Format::Text, None).unwrap().data.dtype(),
            DType::I32
        );
        assert_eq!(
            parse(b"[1, 2.5]", Format::Json, None).unwrap().data.dtype(),
            DType::F32
        );
    }

    fn npy_with_header(dict: &str, data: &[u8]) -> Vec<u8> {
        let mut buf = b"\x93NUMPY\x01\x00".to_vec();
        let pad = (10 + dict.len() + 1).next_multiple_of(64) - 10 - dict.len() - 1;
        let header = format!("{dict}{}\n", " ".repeat(pad));
        buf.extend((header.len() as u16).to_le_bytes());
        buf.extend(header.as_bytes());
        buf.extend(data);
        buf
    }

    #[test]
    fn npy_shapes_that_overflow_are_refused() {
        // (2^62 + 3,) elements of 4 bytes: 2^64 + 12 bytes, which wraps to 12 unchecked.
        let npy = npy_with_header(
            "{'descr': '<u4', 'fortran_order': False, 'shape': (4611686018427387907,), }",
            &[7; 16],
        );
        let e = parse(&npy, Format::Npy, None).unwrap_err().to_string();
        assert!(e.contains("overflows"), "{e}");
        // A product that wraps in the shape itself, not only in bytes.
        let npy = npy_with_header(
            "{'descr': '<i4', 'fortran_order': False, 'shape': (4294967296, 4294967297), }",
            &[7; 16],
        );
        let e = parse(&npy, Format::Npy, None).unwrap_err().to_string();
        assert!(e.contains("overflows"), "{e}");
        // Large but not overflowing: truncated, with the sizes.
        let npy = npy_with_header(
            "{'descr': '<u4', 'fortran_order': False, 'shape': (1000,), }",
            &[7; 16],
        );
        let e = parse(&npy, Format::Npy, None).unwrap_err().to_string();
        assert_eq!(
            e,
            "truncated .npy data: 16 bytes where shape [1000] needs 4000"
        );
    }

    #[test]
    fn json_and_text_read_back_non_finite_floats() {
        let a = Array::vector(Data::F32(vec![
            f32::INFINITY,
            -1.5,
            f32::NEG_INFINITY,
            f32::NAN,
            1e-30,
        ]));
        for f in [Format::Json, Format::Text] {
            let mut buf = Vec::new();
            encode(&mut buf, f, &a).unwrap();
            let text = String::from_utf8(buf.clone()).unwrap();
            assert!(text.contains("-Infinity") && text.contains("NaN"), "{text}");
            // Read back without a dtype: the floats are inferred.
            let Data::F32(back) = parse(&buf, f, None).unwrap().data else {
                panic!("not f32")
            };
            assert_eq!(back.len(), 5);
            assert_eq!(back[0], f32::INFINITY);
            assert_eq!(back[1], -1.5);
            assert_eq!(back[2], f32::NEG_INFINITY);
            assert!(back[3].is_nan());
            assert_eq!(back[4], 1e-30);
        }
        // What gpukit 0.1 wrote, and Python's spelling, are read too.
        let old = parse(b"[inf, -inf, nan, Infinity]", Format::Json, None).unwrap();
        assert_eq!(old.data.get_f64(0), f64::INFINITY);
        assert_eq!(old.data.get_f64(1), f64::NEG_INFINITY);
        assert!(old.data.get_f64(2).is_nan());
        assert_eq!(old.data.get_f64(3), f64::INFINITY);
    }

    #[test]
    fn json_follows_the_standard_elsewhere() {
        for bad in [
            "[01]", "[1.]", "[.5]", "[+1]", "[1e]", "[1,]", "[1 2]", "[1] x", "[-NaN]",
        ] {
            let e = parse(bad.as_bytes(), Format::Json, None).unwrap_err();
            assert!(e.to_string().starts_with("not valid JSON"), "{bad}: {e}");
        }
        let e = parse(b"[1, \"2\"]", Format::Json, None).unwrap_err();
        assert_eq!(e.to_string(), "element [1] is not a number: a string");
        let e = parse(b"{\"a\": [1]}", Format::Json, None).unwrap_err();
        assert_eq!(e.to_string(), "element [] is not a number: an object");
        let deep = format!("{}1{}", "[".repeat(100), "]".repeat(100));
        let e = parse(deep.as_bytes(), Format::Json, None).unwrap_err();
        assert!(e.to_string().contains("nested too deeply"), "{e}");
        let ok = parse(b" [ -0.5e+2 , 3E-1 ] ", Format::Json, None).unwrap();
        assert_eq!(ok.data, Data::F32(vec![-50.0, 0.3]));
    }

    #[test]
    fn floats_past_f32_never_turn_into_infinities_silently() {
        for (bytes, format) in [
            (&b"[1e40, 1]"[..], Format::Json),
            (b"-3.5e38\n1\n", Format::Text),
        ] {
            let e = parse(bytes, format, None).unwrap_err().to_string();
            assert!(e.contains("is outside float32's range"), "{e}");
        }
        // The largest f32 itself, and what rounds to it, are kept.
        let ok = parse(b"[3.4028235e38, 3.40282356e38]", Format::Json, None).unwrap();
        assert_eq!(ok.data, Data::F32(vec![f32::MAX, f32::MAX]));
    }

    #[test]
    fn integers_too_large_never_turn_into_floats_silently() {
        // Past u32, past i64 and past u64 (which generic JSON parsers read as floats).
        for big in [
            "4294967296",
            "9223372036854775808",
            "18446744073709551616",
            "1e400000",
        ] {
            let json = format!("[1, {big}, 3]");
            let got = parse(json.as_bytes(), Format::Json, None);
            if big.contains('e') {
                // A float literal: the array is f32 by what it holds (and inf is kept).
                assert_eq!(got.unwrap().data.get_f64(1), f64::INFINITY);
                continue;
            }
            let e = got.unwrap_err().to_string();
            assert!(
                e.starts_with(&format!("element [1]: {big} does not fit u32")),
                "{big}: {e}"
            );
            let text = parse(format!("1\n{big}\n").as_bytes(), Format::Text, None);
            assert!(text.unwrap_err().to_string().contains("does not fit u32"));
            // Asked for as floats, they are floats.
            let f = parse(json.as_bytes(), Format::Json, Some(DType::F32)).unwrap();
            assert_eq!(f.data.get_f64(1), big.parse::<f64>().unwrap() as f32 as f64);
        }
        let e = parse(b"[-1, 2147483648]", Format::Json, None).unwrap_err();
        assert!(
            e.to_string().contains("2147483648 does not fit u32 or i32"),
            "{e}"
        );
        let e = parse(b"[-2147483649, 5]", Format::Json, None).unwrap_err();
        assert!(
            e.to_string().contains("-2147483649 does not fit i32"),
            "{e}"
        );
        // In range, the integer types are inferred as before.
        let u = parse(b"[0, 4294967295]", Format::Json, None).unwrap();
        assert_eq!(u.data, Data::U32(vec![0, u32::MAX]));
        let i = parse(b"[-2147483648, 2147483647]", Format::Json, None).unwrap();
        assert_eq!(i.data, Data::I32(vec![i32::MIN, i32::MAX]));
    }
}

//! `deltakeeper_native.parse_stats`: stats JSON strings (a large_string array's buffers) into
//! the buffers of a `stats_parsed` struct array. The Python side (deltakeeper.delta.native_stats)
//! allocates the fixed-size buffers, the parser threads write them in place, and Python
//! assembles the Arrow arrays and parses the rows reported as unhandled itself.

mod parse;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use parse::{parse_rows, Column, Kind, Schema};

type Spec = Vec<(String, String, usize, u32, i32)>;
/// Per node: (validity address, its size, values address, its size).
type Targets = Vec<(usize, usize, usize, usize)>;
/// Per node: (null count, utf8 offsets as int32 and data, for a utf8 node only).
type Written<'py> = (usize, Option<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)>);

/// Parse `rows` stats strings. `offsets_address` points at `rows + 1` int64 offsets into the
/// `data_size` bytes at `data_address` (a large_string array's buffers, the array's own offset
/// applied). `spec` is the output struct in preorder: (kind, field name, child count,
/// precision, scale). `targets` are writable buffers per node, of the sizes
/// `buffer_sizes` gives: a validity bitmap and the values (none for struct and utf8). The
/// caller keeps every buffer alive and unshared for the call.
///
/// Returns (per node: null count and a utf8 node's offsets and data, unhandled rows).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
#[pyo3(signature = (rows, offsets_address, data_address, data_size, spec, targets, threads=2))]
fn parse_stats<'py>(
    py: Python<'py>,
    rows: usize,
    offsets_address: usize,
    data_address: usize,
    data_size: usize,
    spec: Spec,
    targets: Targets,
    threads: usize,
) -> PyResult<(Vec<Written<'py>>, Vec<usize>)> {
    let schema = Schema::new(spec).map_err(PyValueError::new_err)?;
    if rows > 0 && (offsets_address == 0 || !offsets_address.is_multiple_of(8)) {
        return Err(PyValueError::new_err(
            "offsets must be an aligned int64 buffer",
        ));
    }
    check_targets(&schema, rows, &targets).map_err(PyValueError::new_err)?;
    let done = py.allow_threads(|| -> Result<_, String> {
        // SAFETY: the caller guarantees the input buffers are alive and of these sizes, and
        // the targets alive, writable, of the checked sizes and used by nothing else.
        let offsets: &[i64] = if rows == 0 {
            &[]
        } else {
            unsafe { std::slice::from_raw_parts(offsets_address as *const i64, rows + 1) }
        };
        let data: &[u8] = if data_size == 0 {
            &[]
        } else {
            unsafe { std::slice::from_raw_parts(data_address as *const u8, data_size) }
        };
        let mut strings: Vec<&[u8]> = Vec::with_capacity(rows);
        for w in offsets.windows(2) {
            let (a, b) = (w[0], w[1]);
            if a < 0 || b < a || b as usize > data.len() {
                return Err("offsets outside the data buffer".into());
            }
            strings.push(&data[a as usize..b as usize]);
        }
        let bufs: Vec<(&mut [u8], &mut [u8])> = targets
            .iter()
            .map(|&(v, vn, x, xn)| unsafe { (writable(v, vn), writable(x, xn)) })
            .collect();
        Ok(parse_parallel(&schema, &strings, bufs, threads.max(1)))
    });
    let (columns, unhandled) = done.map_err(PyValueError::new_err)?;
    let mut written = Vec::with_capacity(columns.len());
    for (node, col) in schema.nodes.iter().zip(&columns) {
        let strings = match node.kind {
            Kind::Utf8 => Some(utf8(py, col)?),
            _ => None,
        };
        written.push((col.nulls, strings));
    }
    Ok((written, unhandled))
}

/// The bytes each node's targets need: (validity, values).
#[pyfunction]
fn buffer_sizes(spec: Spec, rows: usize) -> PyResult<Vec<(usize, usize)>> {
    let schema = Schema::new(spec).map_err(PyValueError::new_err)?;
    Ok(schema.nodes.iter().map(|n| sizes(n.kind, rows)).collect())
}

fn sizes(kind: Kind, rows: usize) -> (usize, usize) {
    (rows.div_ceil(8), kind.values_size(rows))
}

fn check_targets(schema: &Schema, rows: usize, targets: &Targets) -> Result<(), String> {
    if targets.len() != schema.nodes.len() {
        return Err("one target per node".into());
    }
    for (node, &(v, vn, x, xn)) in schema.nodes.iter().zip(targets) {
        let (need_v, need_x) = sizes(node.kind, rows);
        if vn < need_v || xn < need_x || (vn > 0 && v == 0) || (xn > 0 && x == 0) {
            return Err("a target buffer is missing or too small".into());
        }
    }
    Ok(())
}

/// # Safety
/// `address` is null with `size` 0, or `size` writable bytes no one else uses meanwhile.
unsafe fn writable<'a>(address: usize, size: usize) -> &'a mut [u8] {
    if size == 0 {
        &mut []
    } else {
        std::slice::from_raw_parts_mut(address as *mut u8, size)
    }
}

/// Final columns (utf8 parts joined; the rest written in place) and the unhandled rows.
type Parsed<'d> = (Vec<Column<'d>>, Vec<usize>);

/// The rows split into `threads` parts parsed at once, each into its own range of the targets
/// (parts start at a multiple of 8 rows, so at a whole byte of every bitmap).
fn parse_parallel<'d>(
    schema: &Schema,
    strings: &[&[u8]],
    bufs: Vec<(&'d mut [u8], &'d mut [u8])>,
    threads: usize,
) -> Parsed<'d> {
    let per = strings
        .len()
        .div_ceil(threads)
        .max(4096)
        .next_multiple_of(8);
    let chunks: Vec<&[&[u8]]> = match strings {
        [] => vec![strings], // one empty part, so every node still gets a column
        _ => strings.chunks(per).collect(),
    };
    let mut parts: Vec<Vec<Column<'d>>> = chunks.iter().map(|_| Vec::new()).collect();
    for (node, (valid, values)) in schema.nodes.iter().zip(bufs) {
        let (mut valid, mut values) = (valid, values);
        for (part, chunk) in parts.iter_mut().zip(&chunks) {
            let (v, x) = sizes(node.kind, chunk.len());
            let (here, rest) = std::mem::take(&mut valid).split_at_mut(v);
            valid = rest;
            let (here_x, rest_x) = std::mem::take(&mut values).split_at_mut(x);
            values = rest_x;
            part.push(Column::new(node.kind, chunk.len(), here, here_x));
        }
    }
    let unhandled: Vec<Vec<usize>> = if parts.len() <= 1 {
        parts
            .iter_mut()
            .zip(&chunks)
            .map(|(cols, chunk)| parse_rows(schema, chunk, cols))
            .collect()
    } else {
        std::thread::scope(|s| {
            let handles: Vec<_> = parts
                .iter_mut()
                .zip(&chunks)
                .map(|(cols, chunk)| s.spawn(move || parse_rows(schema, chunk, cols)))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("parser thread panicked"))
                .collect()
        })
    };
    join(parts, unhandled, per)
}

/// The parts' null counts summed and utf8 strings joined into the first part's columns.
fn join<'d>(parts: Vec<Vec<Column<'d>>>, unhandled: Vec<Vec<usize>>, per: usize) -> Parsed<'d> {
    let mut all = Vec::new();
    for (k, rows) in unhandled.into_iter().enumerate() {
        all.extend(rows.into_iter().map(|i| i + k * per));
    }
    let mut parts = parts.into_iter();
    let Some(mut first) = parts.next() else {
        return (Vec::new(), all);
    };
    for part in parts {
        for (into, col) in first.iter_mut().zip(part) {
            into.nulls += col.nulls;
            if !col.offsets.is_empty() {
                let shift = into.data.len() as i64;
                into.offsets
                    .extend(col.offsets[1..].iter().map(|o| o + shift));
                into.data.extend_from_slice(&col.data);
            }
        }
    }
    (first, all)
}

fn utf8<'py>(
    py: Python<'py>,
    col: &Column,
) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
    if col.data.len() > i32::MAX as usize {
        return Err(PyValueError::new_err("string column over 2 GiB"));
    }
    let mut o = Vec::with_capacity(col.offsets.len() * 4);
    for &x in &col.offsets {
        o.extend_from_slice(&(x as i32).to_le_bytes());
    }
    Ok((PyBytes::new(py, &o), PyBytes::new(py, &col.data)))
}

#[pymodule]
fn deltakeeper_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(parse_stats, m)?)?;
    m.add_function(wrap_pyfunction!(buffer_sizes, m)?)?;
    Ok(())
}

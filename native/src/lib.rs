//! `deltakeeper_native.parse_stats`: stats JSON strings (a large_string array's buffers) into
//! the buffers of a `stats_parsed` struct array. The Python side (deltakeeper.delta.types)
//! assembles the Arrow arrays and parses the rows reported as unhandled itself.

mod parse;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use parse::{parse_rows, Column, Kind, Output, Schema};

type Spec = Vec<(String, String, usize, u32, i32)>;
type Buffers<'py> = (
    Bound<'py, PyBytes>,
    Option<Bound<'py, PyBytes>>,
    Option<Bound<'py, PyBytes>>,
    Option<Bound<'py, PyBytes>>,
    usize,
);

/// Parse `rows` stats strings. `offsets_address` points at `rows + 1` int64 offsets into the
/// `data_size` bytes at `data_address` (a large_string array's buffers, the array's own offset
/// applied); the caller keeps both buffers alive for the call. `spec` is the output struct in
/// preorder: (kind, field name, child count, precision, scale).
///
/// Returns (columns, unhandled rows); a column is (validity bitmap, values, offsets, data,
/// null count) for its node, values being a bitmap for bool, int32 offsets for utf8.
#[pyfunction]
#[pyo3(signature = (rows, offsets_address, data_address, data_size, spec, threads=2))]
fn parse_stats<'py>(
    py: Python<'py>,
    rows: usize,
    offsets_address: usize,
    data_address: usize,
    data_size: usize,
    spec: Spec,
    threads: usize,
) -> PyResult<(Vec<Buffers<'py>>, Vec<usize>)> {
    let schema = Schema::new(spec).map_err(PyValueError::new_err)?;
    if rows > 0 && (offsets_address == 0 || offsets_address % 8 != 0) {
        return Err(PyValueError::new_err(
            "offsets must be an aligned int64 buffer",
        ));
    }
    let columns = py.allow_threads(|| -> Result<_, String> {
        // SAFETY: the caller guarantees both buffers are alive and of these sizes for the call.
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
        Ok(parse_parallel(&schema, &strings, threads.max(1)))
    });
    let out = columns.map_err(PyValueError::new_err)?;
    let mut result = Vec::with_capacity(schema.nodes.len());
    for (node, col) in schema.nodes.iter().zip(&out.columns) {
        result.push(buffers(py, node.kind, col)?);
    }
    Ok((result, out.unhandled))
}

/// The rows split into `threads` parts parsed at once, then the parts' columns joined.
fn parse_parallel(schema: &Schema, strings: &[&[u8]], threads: usize) -> Output {
    let per = strings.len().div_ceil(threads).max(4096);
    if strings.len() <= per {
        return parse_rows(schema, strings);
    }
    let parts: Vec<Output> = std::thread::scope(|s| {
        let handles: Vec<_> = strings
            .chunks(per)
            .map(|chunk| s.spawn(move || parse_rows(schema, chunk)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("parser thread panicked"))
            .collect()
    });
    join(parts, per)
}

fn join(parts: Vec<Output>, per: usize) -> Output {
    let mut parts = parts.into_iter();
    let mut first = parts.next().expect("at least one part");
    for (k, part) in parts.enumerate() {
        let base = (k + 1) * per;
        first
            .unhandled
            .extend(part.unhandled.iter().map(|i| i + base));
        for (into, col) in first.columns.iter_mut().zip(part.columns) {
            into.valid.extend_from_slice(&col.valid);
            into.values.extend_from_slice(&col.values);
            if !col.offsets.is_empty() {
                let shift = into.data.len() as i64;
                into.offsets
                    .extend(col.offsets[1..].iter().map(|o| o + shift));
                into.data.extend_from_slice(&col.data);
            }
        }
    }
    first
}

fn bitmap(bytes: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; bytes.len().div_ceil(8)];
    for (i, &b) in bytes.iter().enumerate() {
        out[i >> 3] |= (b & 1) << (i & 7);
    }
    out
}

fn buffers<'py>(py: Python<'py>, kind: Kind, col: &Column) -> PyResult<Buffers<'py>> {
    let nulls = col.valid.iter().filter(|&&v| v == 0).count();
    let valid = PyBytes::new(py, &bitmap(&col.valid));
    let (values, offsets, data) = match kind {
        Kind::Struct => (None, None, None),
        Kind::Bool => (Some(PyBytes::new(py, &bitmap(&col.values))), None, None),
        Kind::Utf8 => {
            if col.data.len() > i32::MAX as usize {
                return Err(PyValueError::new_err("string column over 2 GiB"));
            }
            let mut o = Vec::with_capacity(col.offsets.len() * 4);
            for &x in &col.offsets {
                o.extend_from_slice(&(x as i32).to_le_bytes());
            }
            (
                None,
                Some(PyBytes::new(py, &o)),
                Some(PyBytes::new(py, &col.data)),
            )
        }
        _ => (Some(PyBytes::new(py, &col.values)), None, None),
    };
    Ok((valid, values, offsets, data, nulls))
}

#[pymodule]
fn deltakeeper_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(parse_stats, m)?)?;
    Ok(())
}

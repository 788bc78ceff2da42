//! Times `parse_rows` (native/src/parse.rs, compiled in here without pyo3) on one thread.
//!
//!     parse-bench SPEC.tsv STATS.txt [REPEATS]
//!
//! SPEC.tsv: the struct in preorder as `native_stats.spec` gives it, one node a line
//! (kind, name, children, precision, scale, tab-separated). STATS.txt: one stats string a line.
//! `python -m benchmarks.stats_parsed --rows 200000 --dump DIR` writes both. Build with
//! `CARGO_TARGET_DIR=~/.cache/deltakeeper/native-bench-target cargo build --release` (it has
//! line tables, for perf). Prints the fastest time and a checksum of every output buffer, so a faster parser can be
//! checked to give the same bytes.

#[path = "../../src/parse.rs"]
#[allow(dead_code)]
mod parse;

use std::hash::Hasher;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: parse-bench SPEC.tsv STATS.txt [REPEATS]");
        std::process::exit(2);
    }
    let spec = std::fs::read_to_string(&args[1]).expect("read the spec");
    let spec: Vec<(String, String, usize, u32, i32)> = spec
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            let num = |i: usize| f[i].parse::<i64>().expect("a number in the spec");
            (
                f[0].into(),
                f[1].into(),
                num(2) as usize,
                num(3) as u32,
                num(4) as i32,
            )
        })
        .collect();
    let schema = parse::Schema::new(spec).expect("a valid spec");
    let text = std::fs::read(&args[2]).expect("read the stats");
    let rows: Vec<&[u8]> = text
        .strip_suffix(b"\n")
        .unwrap_or(&text)
        .split(|&c| c == b'\n')
        .collect();
    let repeats: usize = args
        .get(3)
        .map_or(3, |r| r.parse().expect("a repeat count"));
    let mut best = f64::INFINITY;
    let mut sum = 0;
    let n = rows.len();
    let kinds: Vec<parse::Kind> = schema.nodes.iter().map(|node| node.kind).collect();
    let mut valid: Vec<Vec<u8>> = kinds.iter().map(|_| vec![0; n.div_ceil(8)]).collect();
    let mut values: Vec<Vec<u8>> = kinds.iter().map(|k| vec![0; k.values_size(n)]).collect();
    for _ in 0..repeats {
        let started = Instant::now();
        let mut columns: Vec<parse::Column> = kinds
            .iter()
            .zip(valid.iter_mut().zip(values.iter_mut()))
            .map(|(&k, (v, x))| parse::Column::new(k, n, v, x))
            .collect();
        let unhandled = parse::parse_rows(&schema, &rows, &mut columns);
        best = best.min(started.elapsed().as_secs_f64());
        sum = checksum(&kinds, n, &columns, &unhandled);
    }
    let ns = best * 1e9;
    println!(
        "{} rows, {} bytes: fastest {:.3} s, {:.0} ns a row, {:.2} ns a byte; checksum {:016x}",
        rows.len(),
        text.len(),
        best,
        ns / rows.len() as f64,
        ns / text.len() as f64,
        sum
    );
}

/// Validity and bool values as a byte a row, as the first version of the parser gave them,
/// so checksums compare across versions.
fn checksum(
    kinds: &[parse::Kind],
    n: usize,
    columns: &[parse::Column],
    unhandled: &[usize],
) -> u64 {
    let bytes =
        |bitmap: &[u8]| -> Vec<u8> { (0..n).map(|i| (bitmap[i >> 3] >> (i & 7)) & 1).collect() };
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for (&kind, c) in kinds.iter().zip(columns) {
        h.write(&bytes(c.valid));
        if kind == parse::Kind::Bool {
            h.write(&bytes(c.values));
        } else {
            h.write(c.values);
        }
        for o in &c.offsets {
            h.write_i64(*o);
        }
        h.write(&c.data);
    }
    for u in unhandled {
        h.write_usize(*u);
    }
    h.finish()
}

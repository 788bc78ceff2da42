//! Stats JSON strings into typed columns, with the semantics of deltakeeper's
//! `types.coerce_row` (Python's `json.loads(parse_float=Decimal)` then `coerce`):
//!
//! - a string that is not JSON (as Python's decoder reads it: strict strings, NaN/Infinity
//!   allowed, last duplicate key wins) or not an object gives a null row;
//! - a value that does not fit its field is null, the rest of the row is kept;
//! - anything whose Python outcome this code does not reproduce exactly (an unusual timestamp
//!   form, a decimal string Python's `Decimal` reads more leniently, a lone surrogate, very long
//!   numbers, deep nesting, invalid UTF-8) makes the row `Unhandled`: the caller parses that
//!   row in Python.

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    Struct,
    Bool,
    I8,
    I16,
    I32,
    I64,
    F32,
    F64,
    Utf8,
    Date32,
    TimestampUs,
    Decimal128,
}

impl Kind {
    pub fn from_name(name: &str) -> Option<Kind> {
        Some(match name {
            "struct" => Kind::Struct,
            "bool" => Kind::Bool,
            "i8" => Kind::I8,
            "i16" => Kind::I16,
            "i32" => Kind::I32,
            "i64" => Kind::I64,
            "f32" => Kind::F32,
            "f64" => Kind::F64,
            "utf8" => Kind::Utf8,
            "date32" => Kind::Date32,
            "timestamp_us" => Kind::TimestampUs,
            "decimal128" => Kind::Decimal128,
            _ => return None,
        })
    }

    /// The width of an integer kind, None for the others.
    pub fn int_bits(self) -> Option<u32> {
        match self {
            Kind::I8 => Some(8),
            Kind::I16 => Some(16),
            Kind::I32 => Some(32),
            Kind::I64 => Some(64),
            _ => None,
        }
    }

    /// Bytes of the values buffer for `rows` rows: a bitmap for bool, none for struct and utf8.
    pub fn values_size(self, rows: usize) -> usize {
        match self {
            Kind::Bool => rows.div_ceil(8),
            _ => rows * self.width(),
        }
    }

    /// Bytes per value in the values buffer (bool: one bit, written apart).
    pub fn width(self) -> usize {
        match self {
            Kind::Struct | Kind::Utf8 => 0,
            Kind::Bool => 0,
            Kind::I8 => 1,
            Kind::I16 => 2,
            Kind::I32 | Kind::F32 | Kind::Date32 => 4,
            Kind::I64 | Kind::F64 | Kind::TimestampUs => 8,
            Kind::Decimal128 => 16,
        }
    }
}

pub struct Node {
    pub kind: Kind,
    pub name: Vec<u8>,
    /// Where a struct's children start in `Schema::keys`.
    pub first_key: usize,
    pub children: Vec<usize>,
    /// One past the last node of this node's subtree (nodes are in preorder).
    pub end: usize,
    pub precision: u32,
    pub scale: i32,
}

/// A struct's field as the parser expects its key, the fields of one struct side by side: the
/// hinted key is then one load away.
pub struct Key {
    pub node: usize,
    pub parent: usize,
    /// The key after this one in its struct's order (wrapping to the first).
    pub next: usize,
    pub len: usize,
    pub name: Vec<u8>,
    /// The name needs no escape in JSON (no quote, backslash or control character), so a key
    /// equal to it byte for byte is this field.
    pub plain: bool,
    /// The name's first 16 bytes as two little-endian words, and the masks of its length.
    words: [u64; 2],
    masks: [u64; 2],
}

impl Key {
    fn new(name: &[u8], node: usize, parent: usize, next: usize) -> Key {
        Key {
            node,
            parent,
            next,
            len: name.len(),
            name: name.to_vec(),
            plain: !name.iter().any(|&c| c == b'"' || c == b'\\' || c < 0x20),
            words: name_words(name),
            masks: name_words(&vec![0xff; name.len().min(16)]),
        }
    }

    /// Whether `b` holds this key's name at `at`, followed by the closing quote.
    #[inline]
    fn is_at(&self, b: &[u8], at: usize) -> bool {
        let l = self.len;
        if b.get(at + l) != Some(&b'"') {
            return false;
        }
        if l <= 16 && at + 16 <= b.len() {
            // Two 8-byte loads against the name's words, masked to its length.
            let word = |k: usize| u64::from_le_bytes(b[at + k..at + k + 8].try_into().unwrap());
            ((word(0) ^ self.words[0]) & self.masks[0])
                | ((word(8) ^ self.words[1]) & self.masks[1])
                == 0
        } else {
            same(&b[at..at + l], &self.name)
        }
    }
}

/// Nodes in preorder; node 0 is the row's struct.
pub struct Schema {
    pub nodes: Vec<Node>,
    pub keys: Vec<Key>,
}

impl Schema {
    /// From (kind, name, child count, precision, scale) in preorder.
    pub fn new(spec: Vec<(String, String, usize, u32, i32)>) -> Result<Schema, String> {
        let mut nodes = Vec::with_capacity(spec.len());
        for (kind, name, _, precision, scale) in &spec {
            let kind = Kind::from_name(kind).ok_or_else(|| format!("unsupported type {kind}"))?;
            if kind == Kind::Decimal128 && !(1..=38).contains(precision) {
                return Err(format!("decimal precision {precision} out of range"));
            }
            nodes.push(Node {
                kind,
                name: name.as_bytes().to_vec(),
                first_key: 0,
                children: Vec::new(),
                end: 0,
                precision: *precision,
                scale: *scale,
            });
        }
        let counts: Vec<usize> = spec.iter().map(|s| s.2).collect();
        if nodes.is_empty() || nodes[0].kind != Kind::Struct {
            return Err("the root must be a struct".into());
        }
        let end = link(&mut nodes, &counts, 0)?;
        if end != nodes.len() {
            return Err("spec has nodes outside the root".into());
        }
        let mut keys = Vec::new();
        for parent in 0..nodes.len() {
            nodes[parent].first_key = keys.len();
            let children = &nodes[parent].children;
            for (i, &c) in children.iter().enumerate() {
                let next = nodes[parent].first_key + next_hint(i, children.len());
                keys.push(Key::new(&nodes[c].name, c, parent, next));
            }
        }
        Ok(Schema { nodes, keys })
    }
}

fn name_words(name: &[u8]) -> [u64; 2] {
    let mut padded = [0u8; 16];
    let l = name.len().min(16);
    padded[..l].copy_from_slice(&name[..l]);
    [0, 8].map(|k| u64::from_le_bytes(padded[k..k + 8].try_into().unwrap()))
}

fn link(nodes: &mut [Node], counts: &[usize], at: usize) -> Result<usize, String> {
    let mut next = at + 1;
    if nodes[at].kind == Kind::Struct {
        for _ in 0..counts[at] {
            if next >= nodes.len() {
                return Err("spec ends inside a struct".into());
            }
            nodes[at].children.push(next);
            next = link(nodes, counts, next)?;
        }
        let mut names: Vec<&[u8]> = nodes[at]
            .children
            .iter()
            .map(|&c| &nodes[c].name[..])
            .collect();
        names.sort();
        if names.windows(2).any(|w| w[0] == w[1]) {
            return Err("a struct has two fields of one name".into());
        }
    } else if counts[at] != 0 {
        return Err("a leaf with children".into());
    }
    nodes[at].end = next;
    Ok(next)
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Fail {
    Syntax,
    Unhandled,
}

type Res<T> = Result<T, Fail>;

#[derive(Clone, Copy, Default)]
struct Slot {
    valid: bool,
    bits: u128,
    /// A string value: its range in the row itself, or in the scratch buffer if unescaped.
    input: bool,
    start: u32,
    len: u32,
}

/// A decoded JSON string: a range of the row (no escapes in it) or of the scratch buffer.
#[derive(Clone, Copy)]
struct Str {
    input: bool,
    a: usize,
    l: usize,
}

/// One node's output for a run of rows, written in place: `valid` is an Arrow validity bitmap,
/// `values` `width` bytes a row (a bitmap for bool, nothing for struct and utf8, whose strings
/// go to `offsets` and `data`). Rows without a value are null with zero bits.
pub struct Column<'d> {
    pub valid: &'d mut [u8],
    pub values: &'d mut [u8],
    pub offsets: Vec<i64>,
    pub data: Vec<u8>,
    pub nulls: usize,
}

impl<'d> Column<'d> {
    /// `valid` and `values` must hold `rows` rows of `kind`; both are zeroed here.
    pub fn new(kind: Kind, rows: usize, valid: &'d mut [u8], values: &'d mut [u8]) -> Self {
        assert!(valid.len() >= rows.div_ceil(8), "validity buffer too small");
        assert!(
            values.len() >= kind.values_size(rows),
            "values buffer too small"
        );
        valid.fill(0);
        values.fill(0);
        let offsets = if kind == Kind::Utf8 {
            vec![0]
        } else {
            Vec::new()
        };
        Column {
            valid,
            values,
            offsets,
            data: Vec::new(),
            nulls: 0,
        }
    }
}

const MAX_DEPTH: usize = 64;
const MAX_NUMBER: usize = 300;

struct Parser<'a> {
    schema: &'a Schema,
    slots: Vec<Slot>,
    scratch: Vec<u8>,
    b: &'a [u8],
    pos: usize,
    depth: usize,
    hint: Vec<usize>,
}

/// Parse `rows` into `columns` (one per node, made by `Column::new` for `rows.len()` rows);
/// returns the rows (indexes into `rows`) that Python must parse, null here.
pub fn parse_rows(schema: &Schema, rows: &[&[u8]], columns: &mut [Column]) -> Vec<usize> {
    assert_eq!(columns.len(), schema.nodes.len(), "one column per node");
    let mut p = Parser {
        schema,
        slots: vec![Slot::default(); schema.nodes.len()],
        scratch: Vec::new(),
        b: &[],
        pos: 0,
        depth: 0,
        hint: schema.nodes.iter().map(|n| n.first_key).collect(),
    };
    let mut unhandled = Vec::new();
    for (i, row) in rows.iter().enumerate() {
        match p.row(row) {
            Ok(()) => {}
            Err(Fail::Syntax) => p.clear(0, schema.nodes.len()),
            Err(Fail::Unhandled) => {
                p.clear(0, schema.nodes.len());
                unhandled.push(i);
            }
        }
        p.emit(i, columns);
    }
    unhandled
}

impl<'a> Parser<'a> {
    fn row(&mut self, row: &'a [u8]) -> Res<()> {
        // Nearly every row is ASCII, which is quicker to check than UTF-8.
        if !row.is_ascii() && std::str::from_utf8(row).is_err() {
            return Err(Fail::Unhandled);
        }
        self.b = row;
        self.pos = 0;
        self.depth = 0;
        self.scratch.clear();
        self.clear(0, self.slots.len());
        self.value(0)?;
        self.ws();
        if self.pos != self.b.len() {
            return Err(Fail::Syntax);
        }
        Ok(())
    }

    fn clear(&mut self, from: usize, to: usize) {
        for s in &mut self.slots[from..to] {
            s.valid = false;
        }
    }

    fn emit(&self, row: usize, columns: &mut [Column]) {
        let (byte, bit) = (row >> 3, 1u8 << (row & 7));
        for (i, (node, col)) in self.schema.nodes.iter().zip(columns.iter_mut()).enumerate() {
            let s = &self.slots[i];
            if s.valid {
                col.valid[byte] |= bit;
            } else {
                col.nulls += 1;
            }
            match node.kind {
                Kind::Struct => {}
                Kind::Utf8 => {
                    if s.valid {
                        let (a, l) = (s.start as usize, s.len as usize);
                        let src = if s.input { self.b } else { &self.scratch[..] };
                        col.data.extend_from_slice(&src[a..a + l]);
                    }
                    col.offsets.push(col.data.len() as i64);
                }
                Kind::Bool if s.valid && s.bits != 0 => col.values[byte] |= bit,
                Kind::Bool => {}
                kind if s.valid => {
                    // One fixed-size copy per width: a slice of run-time length is a memcpy call.
                    let (v, b) = (&mut *col.values, s.bits);
                    match kind.width() {
                        1 => v[row] = b as u8,
                        2 => v[row * 2..row * 2 + 2].copy_from_slice(&(b as u16).to_le_bytes()),
                        4 => v[row * 4..row * 4 + 4].copy_from_slice(&(b as u32).to_le_bytes()),
                        8 => v[row * 8..row * 8 + 8].copy_from_slice(&(b as u64).to_le_bytes()),
                        _ => v[row * 16..row * 16 + 16].copy_from_slice(&b.to_le_bytes()),
                    }
                }
                _ => {}
            }
        }
    }

    #[inline]
    fn peek(&self) -> Option<u8> {
        self.b.get(self.pos).copied()
    }

    #[inline]
    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    fn literal(&mut self, word: &[u8]) -> Res<()> {
        if self.b[self.pos..].starts_with(word) {
            self.pos += word.len();
            Ok(())
        } else {
            Err(Fail::Syntax)
        }
    }

    fn set(&mut self, node: usize, bits: u128) {
        let s = &mut self.slots[node];
        s.valid = true;
        s.bits = bits;
    }

    /// One JSON value into `node` (whose subtree is cleared first: a later duplicate key wins).
    fn value(&mut self, node: usize) -> Res<()> {
        let (kind, end) = {
            let n = &self.schema.nodes[node];
            (n.kind, n.end)
        };
        // A later duplicate key wins: what an earlier value set in this subtree goes. A
        // struct's children are only ever set while it is valid, and every slot is cleared
        // at the start of a row, so an invalid struct has nothing below it to clear.
        if kind == Kind::Struct && self.slots[node].valid {
            self.clear(node + 1, end);
        }
        self.slots[node].valid = false;
        self.ws();
        match self.peek() {
            Some(b'{') if kind == Kind::Struct => self.object(node),
            Some(b'{' | b'[') => self.skip(),
            Some(b'"') => {
                let s = self.string()?;
                self.store_text(node, s)
            }
            Some(b't') => {
                self.literal(b"true")?;
                if kind == Kind::Bool {
                    self.set(node, 1);
                }
                Ok(())
            }
            Some(b'f') => {
                self.literal(b"false")?;
                if kind == Kind::Bool {
                    self.set(node, 0);
                }
                Ok(())
            }
            Some(b'n') => self.literal(b"null"),
            Some(b'N') => {
                self.literal(b"NaN")?;
                self.special_float(node, f64::NAN);
                Ok(())
            }
            Some(b'I') => {
                self.literal(b"Infinity")?;
                self.special_float(node, f64::INFINITY);
                Ok(())
            }
            Some(b'-') if self.b.get(self.pos + 1) == Some(&b'I') => {
                self.literal(b"-Infinity")?;
                self.special_float(node, f64::NEG_INFINITY);
                Ok(())
            }
            Some(b'-' | b'0'..=b'9') => match (kind, kind.int_bits()) {
                (_, Some(bits)) => self.int_value(node, bits),
                (Kind::F64 | Kind::F32, _) => self.float_value(node, kind),
                _ => {
                    let (a, z, int) = self.number()?;
                    self.store_number(node, a, z, int)
                }
            },
            _ => Err(Fail::Syntax),
        }
    }

    /// A number into a float field: read in one pass when it is a plain decimal of at most
    /// 15 digits without exponent (as `short_float`), else as any number.
    #[inline]
    fn float_value(&mut self, node: usize, kind: Kind) -> Res<()> {
        let b = self.b;
        let neg = b[self.pos] == b'-';
        let first = self.pos + neg as usize;
        let (mut i, mut m, mut point) = (first, 0u64, None);
        loop {
            match b.get(i) {
                Some(&c @ b'0'..=b'9') => m = m.wrapping_mul(10).wrapping_add((c - b'0') as u64),
                Some(b'.') if point.is_none() => point = Some(i),
                _ => break,
            }
            i += 1;
        }
        let whole = point.unwrap_or(i) - first;
        let frac = point.map_or(0, |p| i - p - 1);
        let plain = whole >= 1
            && (whole == 1 || b[first] != b'0') // "01": the number ends at the 0
            && (point.is_none() || frac >= 1) // "1.": the number ends before the point
            && whole + frac <= 15
            && !matches!(b.get(i), Some(b'e' | b'E'));
        if !plain {
            let (a, z, int) = self.number()?;
            return self.store_number(node, a, z, int);
        }
        self.pos = i;
        let v = m as f64 / EXACT_POW10[frac];
        // Python's int has no negative zero; a float token keeps its sign.
        let v = if neg && (point.is_some() || m != 0) {
            -v
        } else {
            v
        };
        let bits = match kind {
            Kind::F32 => (v as f32).to_bits() as u128,
            _ => v.to_bits() as u128,
        };
        self.set(node, bits);
        Ok(())
    }

    /// A number into an integer field: read in one pass when it is a plain integer of at
    /// most 19 digits (nearly always), else as any number.
    #[inline]
    fn int_value(&mut self, node: usize, bits: u32) -> Res<()> {
        let b = self.b;
        let neg = b[self.pos] == b'-';
        let first = self.pos + neg as usize;
        let (mut i, mut v) = (first, 0u64);
        while let Some(d) = b.get(i).map(|c| c.wrapping_sub(b'0')).filter(|&d| d <= 9) {
            v = v.wrapping_mul(10).wrapping_add(d as u64);
            i += 1;
        }
        let n = i - first;
        let leading_zero = n > 1 && b[first] == b'0'; // "01": the number ends at the 0
        if n == 0 || n > 19 || leading_zero || matches!(b.get(i), Some(b'.' | b'e' | b'E')) {
            let (a, z, int) = self.number()?;
            return self.store_number(node, a, z, int);
        }
        self.pos = i;
        if let Some(x) = int_range(neg, v, bits) {
            self.set(node, x);
        }
        Ok(())
    }

    fn special_float(&mut self, node: usize, v: f64) {
        match self.schema.nodes[node].kind {
            Kind::F64 => self.set(node, v.to_bits() as u128),
            Kind::F32 => self.set(node, (v as f32).to_bits() as u128),
            _ => {}
        }
    }

    fn object(&mut self, node: usize) -> Res<()> {
        self.pos += 1;
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(Fail::Unhandled);
        }
        self.slots[node].valid = true;
        self.ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            self.depth -= 1;
            return Ok(());
        }
        loop {
            self.ws();
            if self.peek() != Some(b'"') {
                return Err(Fail::Syntax);
            }
            let child = match self.expected_key(node) {
                Some(c) => Some(c),
                None => {
                    let mark = self.scratch.len();
                    let key = self.string()?;
                    let child = self.child(node, key);
                    self.scratch.truncate(mark);
                    child
                }
            };
            self.ws();
            if self.peek() != Some(b':') {
                return Err(Fail::Syntax);
            }
            self.pos += 1;
            match child {
                Some(c) => self.value(c)?,
                None => {
                    self.ws();
                    self.skip()?
                }
            }
            self.ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    self.depth -= 1;
                    return Ok(());
                }
                _ => return Err(Fail::Syntax),
            }
        }
    }

    /// The child of `node` named by `key`. Keys usually come in schema order, so the search
    /// starts after the last match.
    fn child(&mut self, node: usize, key: Str) -> Option<usize> {
        let schema = self.schema;
        let children = &schema.nodes[node].children;
        let b = self.b;
        let key = if key.input {
            &b[key.a..key.a + key.l]
        } else {
            &self.scratch[key.a..key.a + key.l]
        };
        let first = schema.nodes[node].first_key;
        let start = self.hint[node] - first;
        let order = children[start..].iter().chain(&children[..start]);
        for (step, &c) in order.enumerate() {
            if schema.nodes[c].name == key {
                self.hint[node] = first + next_hint(start + step, children.len());
                return Some(c);
            }
        }
        None
    }

    /// The hinted child of `node` if the key at `pos` (its opening quote) is exactly that
    /// child's name, with no escapes: the common case, checked without decoding the key.
    #[inline]
    fn expected_key(&mut self, node: usize) -> Option<usize> {
        let schema = self.schema;
        let key = schema.keys.get(self.hint[node])?;
        if key.parent != node || !key.plain {
            return None; // a struct without fields, or a name that needs escapes
        }
        let at = self.pos + 1;
        if key.is_at(self.b, at) {
            self.pos = at + key.len + 1;
            self.hint[node] = key.next;
            return Some(key.node);
        }
        None
    }

    /// A JSON string (at its opening quote): a range of the row when it has no escapes (the
    /// common case, no copy), else decoded into the scratch buffer.
    fn string(&mut self) -> Res<Str> {
        self.pos += 1;
        let from = self.pos;
        let stop = string_stop(self.b, from);
        if self.b.get(stop) == Some(&b'"') {
            self.pos = stop + 1;
            return Ok(Str {
                input: true,
                a: from,
                l: stop - from,
            });
        }
        let start = self.scratch.len();
        loop {
            let from = self.pos;
            while let Some(&c) = self.b.get(self.pos) {
                if c == b'"' || c == b'\\' || c < 0x20 {
                    break;
                }
                self.pos += 1;
            }
            self.scratch.extend_from_slice(&self.b[from..self.pos]);
            match self.peek() {
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(Str {
                        input: false,
                        a: start,
                        l: self.scratch.len() - start,
                    });
                }
                Some(b'\\') => self.escape()?,
                _ => return Err(Fail::Syntax), // a control character or the end of the row
            }
        }
    }

    fn escape(&mut self) -> Res<()> {
        let c = *self.b.get(self.pos + 1).ok_or(Fail::Syntax)?;
        self.pos += 2;
        let byte = match c {
            b'"' => b'"',
            b'\\' => b'\\',
            b'/' => b'/',
            b'b' => 8,
            b'f' => 12,
            b'n' => b'\n',
            b'r' => b'\r',
            b't' => b'\t',
            b'u' => {
                let mut cp = self.hex4()?;
                if (0xD800..0xDC00).contains(&cp) {
                    if self.b.get(self.pos) == Some(&b'\\')
                        && self.b.get(self.pos + 1) == Some(&b'u')
                    {
                        self.pos += 2;
                        let low = self.hex4()?;
                        if !(0xDC00..0xE000).contains(&low) {
                            return Err(Fail::Unhandled); // a lone surrogate
                        }
                        cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
                    } else {
                        return Err(Fail::Unhandled);
                    }
                } else if (0xDC00..0xE000).contains(&cp) {
                    return Err(Fail::Unhandled);
                }
                let ch = char::from_u32(cp).ok_or(Fail::Unhandled)?;
                let mut buf = [0u8; 4];
                self.scratch
                    .extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                return Ok(());
            }
            _ => return Err(Fail::Syntax),
        };
        self.scratch.push(byte);
        Ok(())
    }

    fn hex4(&mut self) -> Res<u32> {
        let digits = self.b.get(self.pos..self.pos + 4).ok_or(Fail::Syntax)?;
        let mut v = 0u32;
        for &d in digits {
            let x = (d as char).to_digit(16).ok_or(Fail::Syntax)?;
            v = v * 16 + x;
        }
        self.pos += 4;
        Ok(v)
    }

    /// A JSON number token: (start, end, is an integer). Python's decoder reads the same
    /// grammar; a token it would leave half-read ("1.", "1e") fails at the next token anyway.
    fn number(&mut self) -> Res<(usize, usize, bool)> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => self.digits(),
            _ => return Err(Fail::Syntax),
        }
        let mut int = true;
        if self.peek() == Some(b'.') && matches!(self.b.get(self.pos + 1), Some(b'0'..=b'9')) {
            self.pos += 1;
            self.digits();
            int = false;
        }
        if let Some(b'e' | b'E') = self.peek() {
            let mut at = self.pos + 1;
            if let Some(b'+' | b'-') = self.b.get(at) {
                at += 1;
            }
            if matches!(self.b.get(at), Some(b'0'..=b'9')) {
                self.pos = at;
                self.digits();
                int = false;
            }
        }
        if self.pos - start > MAX_NUMBER {
            return Err(Fail::Unhandled);
        }
        Ok((start, self.pos, int))
    }

    fn digits(&mut self) {
        while let Some(b'0'..=b'9') = self.peek() {
            self.pos += 1;
        }
    }

    /// Past an opening bracket, one level deeper: true when `close` follows at once (consumed).
    fn open(&mut self, close: u8) -> Res<bool> {
        self.pos += 1;
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(Fail::Unhandled);
        }
        self.ws();
        let empty = self.peek() == Some(close);
        if empty {
            self.pos += 1;
        }
        Ok(empty)
    }

    /// After a member of an object or array: true at `close` (consumed), false at a comma.
    fn member_end(&mut self, close: u8) -> Res<bool> {
        self.ws();
        match self.peek() {
            Some(b',') => {
                self.pos += 1;
                Ok(false)
            }
            Some(c) if c == close => {
                self.pos += 1;
                Ok(true)
            }
            _ => Err(Fail::Syntax),
        }
    }

    /// Skip one value, checking its syntax (Python rejects the row for any error in it).
    fn skip(&mut self) -> Res<()> {
        self.ws();
        match self.peek() {
            Some(b'{') => {
                if !self.open(b'}')? {
                    loop {
                        self.ws();
                        if self.peek() != Some(b'"') {
                            return Err(Fail::Syntax);
                        }
                        let mark = self.scratch.len();
                        self.string()?;
                        self.scratch.truncate(mark);
                        self.ws();
                        if self.peek() != Some(b':') {
                            return Err(Fail::Syntax);
                        }
                        self.pos += 1;
                        self.skip()?;
                        if self.member_end(b'}')? {
                            break;
                        }
                    }
                }
                self.depth -= 1;
                Ok(())
            }
            Some(b'[') => {
                if !self.open(b']')? {
                    loop {
                        self.skip()?;
                        if self.member_end(b']')? {
                            break;
                        }
                    }
                }
                self.depth -= 1;
                Ok(())
            }
            Some(b'"') => {
                let mark = self.scratch.len();
                self.string()?;
                self.scratch.truncate(mark);
                Ok(())
            }
            Some(b't') => self.literal(b"true"),
            Some(b'f') => self.literal(b"false"),
            Some(b'n') => self.literal(b"null"),
            Some(b'N') => self.literal(b"NaN"),
            Some(b'I') => self.literal(b"Infinity"),
            Some(b'-') if self.b.get(self.pos + 1) == Some(&b'I') => self.literal(b"-Infinity"),
            Some(b'-' | b'0'..=b'9') => self.number().map(|_| ()),
            _ => Err(Fail::Syntax),
        }
    }

    fn store_number(&mut self, node: usize, a: usize, z: usize, int: bool) -> Res<()> {
        let schema = self.schema;
        let n = &schema.nodes[node];
        let b = self.b;
        let tok = &b[a..z];
        let bits = match n.kind {
            Kind::I8 => int_in(tok, int, 8),
            Kind::I16 => int_in(tok, int, 16),
            Kind::I32 => int_in(tok, int, 32),
            Kind::I64 => int_in(tok, int, 64),
            Kind::F64 => Some(float_of(tok, int).to_bits() as u128),
            Kind::F32 => Some((float_of(tok, int) as f32).to_bits() as u128),
            Kind::Decimal128 => decimal(tok, n.precision, n.scale)?.map(|v| v as u128),
            _ => None,
        };
        if let Some(bits) = bits {
            self.set(node, bits);
        }
        Ok(())
    }

    fn store_text(&mut self, node: usize, s: Str) -> Res<()> {
        let schema = self.schema;
        let n = &schema.nodes[node];
        let b = self.b;
        let text = if s.input {
            &b[s.a..s.a + s.l]
        } else {
            &self.scratch[s.a..s.a + s.l]
        };
        let bits = match n.kind {
            Kind::Utf8 => {
                let slot = &mut self.slots[node];
                slot.valid = true;
                slot.input = s.input;
                slot.start = s.a as u32;
                slot.len = s.l as u32;
                return Ok(());
            }
            Kind::F64 | Kind::F32 => {
                let v = match text {
                    b"NaN" => f64::NAN,
                    b"Infinity" => f64::INFINITY,
                    b"-Infinity" => f64::NEG_INFINITY,
                    _ => return Ok(()),
                };
                self.special_float(node, v);
                return Ok(());
            }
            Kind::Date32 => date(text)?.map(|d| d as u32 as u128),
            Kind::TimestampUs => Some(timestamp(text)? as u64 as u128),
            Kind::Decimal128 => {
                plain_text(text)?;
                if !decimal_syntax(text) {
                    return Err(Fail::Unhandled); // Python's Decimal reads more forms
                }
                decimal(text, n.precision, n.scale)?.map(|v| v as u128)
            }
            _ => None,
        };
        if let Some(bits) = bits {
            self.set(node, bits);
        }
        Ok(())
    }
}

/// The first byte at or after `i` that ends a plain run of string: a quote, a backslash or a
/// control character (`b.len()` if none), found 8 bytes at a time.
#[inline]
fn string_stop(b: &[u8], mut i: usize) -> usize {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    while i + 8 <= b.len() {
        let w = u64::from_le_bytes(b[i..i + 8].try_into().unwrap());
        let (q, s) = (w ^ (LO * b'"' as u64), w ^ (LO * b'\\' as u64));
        // A byte equal to zero (in q or s) or below 0x20 (in w) sets its high bit. A borrow can
        // only flag bytes above a real match, so the lowest flag is the first match.
        let hit = ((q.wrapping_sub(LO) & !q)
            | (s.wrapping_sub(LO) & !s)
            | (w.wrapping_sub(LO * 0x20) & !w))
            & HI;
        if hit != 0 {
            return i + (hit.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < b.len() && !matches!(b[i], b'"' | b'\\' | 0..=0x1f) {
        i += 1;
    }
    i
}

fn next_hint(i: usize, children: usize) -> usize {
    // `(i + 1) % children` without a division: this runs for every key.
    if i + 1 >= children {
        0
    } else {
        i + 1
    }
}

/// Byte equality of short slices, without a call to memcmp.
#[inline]
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

/// An integer token within a signed `bits`-bit range, as its two's complement bits.
fn int_in(tok: &[u8], int: bool, bits: u32) -> Option<u128> {
    if !int {
        return None;
    }
    let (neg, digits) = match tok.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, tok),
    };
    // JSON has no leading zeros: 20 digits or more is at least 10^19, beyond any i64, and 19
    // digits fit a u64 without checks.
    if digits.len() > 19 {
        return None;
    }
    let mut v: u64 = 0;
    for &d in digits {
        v = v * 10 + (d - b'0') as u64;
    }
    int_range(neg, v, bits)
}

/// `v` (negated if `neg`) within a signed `bits`-bit range, as its two's complement bits.
#[inline]
fn int_range(neg: bool, v: u64, bits: u32) -> Option<u128> {
    let limit = 1u64 << (bits - 1);
    let x = if neg {
        if v > limit {
            return None;
        }
        (v as i64).wrapping_neg()
    } else {
        if v >= limit {
            return None;
        }
        v as i64
    };
    Some(x as u64 as u128)
}

fn float_of(tok: &[u8], int: bool) -> f64 {
    // The token is ASCII JSON number syntax, which Rust's float parser accepts; it rounds
    // correctly, as Python's float(int) and float(Decimal) do.
    let v: f64 = short_float(tok).unwrap_or_else(|| {
        std::str::from_utf8(tok)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(f64::NAN)
    });
    if int && v == 0.0 {
        0.0 // Python's int has no negative zero
    } else {
        v
    }
}

/// Powers of ten that f64 holds exactly.
const EXACT_POW10: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

/// A number token of at most 15 digits and no exponent (most stats): its digits as an integer
/// and 10^(digits after the point) are both exact in f64, so one division rounds correctly
/// (Clinger's fast path). None for any other token.
#[inline]
fn short_float(tok: &[u8]) -> Option<f64> {
    let (neg, t) = match tok.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, tok),
    };
    if t.len() > 16 {
        return None;
    }
    let (mut m, mut digits, mut frac, mut point) = (0u64, 0, 0, false);
    for &c in t {
        match c {
            b'0'..=b'9' => {
                m = m * 10 + (c - b'0') as u64;
                digits += 1;
                frac += point as usize;
            }
            b'.' => point = true,
            _ => return None,
        }
    }
    if digits > 15 {
        return None;
    }
    let v = m as f64 / EXACT_POW10[frac];
    Some(if neg { -v } else { v })
}

/// Python's `str.strip()` would change the text or it holds non-ASCII: leave it to Python.
fn plain_text(text: &[u8]) -> Res<()> {
    let space = |c: u8| matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | 0x1c..=0x1f);
    if text.iter().any(|&c| c >= 0x80) {
        return Err(Fail::Unhandled);
    }
    if let (Some(&first), Some(&last)) = (text.first(), text.last()) {
        if space(first) || space(last) {
            return Err(Fail::Unhandled);
        }
    }
    Ok(())
}

/// `[+-]? (digits [. digits?] | . digits) ([eE] [+-]? digits)?`, all ASCII.
fn decimal_syntax(t: &[u8]) -> bool {
    let mut i = 0;
    if let Some(b'+' | b'-') = t.first() {
        i = 1;
    }
    let int_start = i;
    while i < t.len() && t[i].is_ascii_digit() {
        i += 1;
    }
    let mut digits = i - int_start;
    if i < t.len() && t[i] == b'.' {
        i += 1;
        let f = i;
        while i < t.len() && t[i].is_ascii_digit() {
            i += 1;
        }
        digits += i - f;
    }
    if digits == 0 {
        return false;
    }
    if i < t.len() && (t[i] == b'e' || t[i] == b'E') {
        i += 1;
        if i < t.len() && (t[i] == b'+' || t[i] == b'-') {
            i += 1;
        }
        let e = i;
        while i < t.len() && t[i].is_ascii_digit() {
            i += 1;
        }
        if i == e {
            return false;
        }
    }
    i == t.len()
}

/// The unscaled value of a decimal text at exactly `scale` digits, None if that would round
/// or not fit `precision` digits (Python: quantize, then compare and bound).
fn decimal(t: &[u8], precision: u32, scale: i32) -> Res<Option<i128>> {
    let (neg, t) = match t.split_first() {
        Some((b'-', rest)) => (true, rest),
        Some((b'+', rest)) => (false, rest),
        _ => (false, t),
    };
    let e_at = t
        .iter()
        .position(|&c| c == b'e' || c == b'E')
        .unwrap_or(t.len());
    let (mantissa, exp_part) = (&t[..e_at], t.get(e_at + 1..).unwrap_or(&[]));
    let mut exp: i64 = 0;
    if !exp_part.is_empty() {
        let (eneg, ed) = match exp_part.split_first() {
            Some((b'-', r)) => (true, r),
            Some((b'+', r)) => (false, r),
            _ => (false, exp_part),
        };
        if ed.len() > 9 {
            return Err(Fail::Unhandled);
        }
        for &d in ed {
            exp = exp * 10 + (d - b'0') as i64;
        }
        if eneg {
            exp = -exp;
        }
    }
    let mut coef: Vec<u8> = Vec::with_capacity(mantissa.len());
    let mut frac_digits: i64 = 0;
    let mut in_frac = false;
    for &c in mantissa {
        if c == b'.' {
            in_frac = true;
        } else {
            coef.push(c - b'0');
            if in_frac {
                frac_digits += 1;
            }
        }
    }
    exp -= frac_digits;
    let lead = coef.iter().position(|&d| d != 0).unwrap_or(coef.len());
    let coef = &coef[lead..];
    if coef.is_empty() {
        return Ok(Some(0));
    }
    let trail = coef.iter().rev().take_while(|&&d| d == 0).count();
    let coef = &coef[..coef.len() - trail];
    exp += trail as i64;
    let k = exp + scale as i64; // zeros to append for the unscaled value
    if k < 0 || coef.len() as i64 + k > precision as i64 {
        return Ok(None);
    }
    let mut v: i128 = 0;
    for &d in coef {
        v = v * 10 + d as i128;
    }
    for _ in 0..k {
        v *= 10;
    }
    Ok(Some(if neg { -v } else { v }))
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        _ => 28,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146097 + doe - 719468
}

fn num(t: &[u8]) -> i64 {
    t.iter().fold(0, |v, &d| v * 10 + (d - b'0') as i64)
}

/// The two ASCII digits at `at` as a number, None if they are not both there.
#[inline]
fn two_digits(t: &[u8], at: usize) -> Option<i64> {
    let (hi, lo) = (
        t.get(at)?.wrapping_sub(b'0'),
        t.get(at + 1)?.wrapping_sub(b'0'),
    );
    (hi <= 9 && lo <= 9).then_some((hi * 10 + lo) as i64)
}

fn all_digits(t: &[u8]) -> bool {
    !t.is_empty() && t.iter().all(u8::is_ascii_digit)
}

/// `parse_date`: `\d{4}-\d{1,2}-\d{1,2}` after strip, else null; an impossible date is null.
fn date(t: &[u8]) -> Res<Option<i32>> {
    plain_text(t)?;
    let parts: Vec<&[u8]> = t.split(|&c| c == b'-').collect();
    if parts.len() != 3
        || parts[0].len() != 4
        || !(1..=2).contains(&parts[1].len())
        || !(1..=2).contains(&parts[2].len())
        || !parts.iter().all(|p| all_digits(p))
    {
        return Ok(None);
    }
    let (y, m, d) = (num(parts[0]), num(parts[1]), num(parts[2]));
    if y < 1 || !(1..=12).contains(&m) || d < 1 || d > days_in_month(y, m) {
        return Ok(None);
    }
    Ok(Some(days_from_civil(y, m, d) as i32))
}

const MIN_US: i64 = -62_135_596_800_000_000; // 0001-01-01T00:00:00
const MAX_US: i64 = 253_402_300_799_999_999; // 9999-12-31T23:59:59.999999

/// `parse_timestamp` for the forms Delta writes: `YYYY-MM-DD[(T| )HH:MM[:SS[.f{1,6}]][Z|±HH:MM]]`,
/// as microseconds since the epoch in UTC. Every other text is left to Python's fromisoformat.
fn timestamp(t: &[u8]) -> Res<i64> {
    // No `plain_text` check: its failures (non-ASCII, space at either end) are outside this
    // grammar too, and leave the text to Python just the same.
    let bad = Err(Fail::Unhandled);
    let at = |i: usize| t.get(i).copied();
    if at(4) != Some(b'-') || at(7) != Some(b'-') {
        return bad;
    }
    let (Some(y), Some(m), Some(d)) = (two_digits(t, 0), two_digits(t, 5), two_digits(t, 8)) else {
        return bad;
    };
    let Some(y) = two_digits(t, 2).map(|low| y * 100 + low) else {
        return bad;
    };
    if y < 1 || !(1..=12).contains(&m) || d < 1 || d > days_in_month(y, m) {
        return bad;
    }
    let mut us = days_from_civil(y, m, d) * 86_400_000_000;
    let mut rest = &t[10..];
    if !rest.is_empty() {
        if !(rest[0] == b'T' || rest[0] == b' ') || rest.get(3) != Some(&b':') {
            return bad;
        }
        let (Some(h), Some(mi)) = (two_digits(rest, 1), two_digits(rest, 4)) else {
            return bad;
        };
        let mut s = 0;
        let mut frac = 0;
        rest = &rest[6..];
        if rest.first() == Some(&b':') {
            s = two_digits(rest, 1).ok_or(Fail::Unhandled)?;
            rest = &rest[3..];
            if rest.first() == Some(&b'.') {
                let n = rest[1..].iter().take_while(|c| c.is_ascii_digit()).count();
                if !(1..=6).contains(&n) {
                    return bad;
                }
                frac = num(&rest[1..1 + n]) * [100_000, 10_000, 1_000, 100, 10, 1][n - 1];
                rest = &rest[1 + n..];
            }
        }
        if h > 23 || mi > 59 || s > 59 {
            return bad;
        }
        us += ((h * 60 + mi) * 60 + s) * 1_000_000 + frac;
        match rest {
            [] | [b'Z'] => {}
            [sign @ (b'+' | b'-'), _, _, b':', _, _] => {
                let (Some(oh), Some(om)) = (two_digits(rest, 1), two_digits(rest, 4)) else {
                    return bad;
                };
                if oh > 23 || om > 59 {
                    return bad;
                }
                let off = (oh * 60 + om) * 60_000_000;
                us += if *sign == b'+' { -off } else { off };
            }
            _ => return bad,
        }
    }
    if !(MIN_US..=MAX_US).contains(&us) {
        return bad; // Python's astimezone raises OverflowError there
    }
    Ok(us)
}

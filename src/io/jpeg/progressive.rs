//! Progressive JPEG as libjpeg-turbo writes it: jcparam.c's `jpeg_simple_progression` script
//! and jcphuff.c's scan coding (DC first and refinement, AC spectral selection with EOB runs,
//! AC refinement with buffered correction bits), each scan with tables made for it.

use super::huffman::{nbits, BitWriter, Codes, Table};
use super::{scan_order, Component};

/// One scan: components (indices), spectral band Ss..=Se, successive approximation Ah, Al.
struct Scan {
    comps: Vec<usize>,
    ss: usize,
    se: usize,
    ah: u8,
    al: u8,
}

fn scan(comps: &[usize], ss: usize, se: usize, ah: u8, al: u8) -> Scan {
    Scan {
        comps: comps.to_vec(),
        ss,
        se,
        ah,
        al,
    }
}

/// jcparam.c's `jpeg_simple_progression`: its YCbCr script, or the all-purpose one for gray.
fn script(ncomps: usize) -> Vec<Scan> {
    if ncomps == 3 {
        vec![
            scan(&[0, 1, 2], 0, 0, 0, 1),
            scan(&[0], 1, 5, 0, 2),
            scan(&[2], 1, 63, 0, 1),
            scan(&[1], 1, 63, 0, 1),
            scan(&[0], 6, 63, 0, 2),
            scan(&[0], 1, 63, 2, 1),
            scan(&[0, 1, 2], 0, 0, 1, 0),
            scan(&[2], 1, 63, 1, 0),
            scan(&[1], 1, 63, 1, 0),
            scan(&[0], 1, 63, 1, 0),
        ]
    } else {
        vec![
            scan(&[0], 0, 0, 0, 1),
            scan(&[0], 1, 5, 0, 2),
            scan(&[0], 6, 63, 0, 2),
            scan(&[0], 1, 63, 2, 1),
            scan(&[0], 0, 0, 1, 0),
            scan(&[0], 1, 63, 1, 0),
        ]
    }
}

/// Where a scan's symbols and bits go: counted (the gathering pass) or written.
trait Sink {
    fn symbol(&mut self, table: usize, sym: u8);
    fn bits(&mut self, value: u32, n: u32);
}

struct Counts(Vec<[u64; 256]>);

impl Sink for Counts {
    fn symbol(&mut self, table: usize, sym: u8) {
        self.0[table][sym as usize] += 1;
    }
    fn bits(&mut self, _: u32, _: u32) {}
}

struct Writer<'a, 'b> {
    w: BitWriter<'a>,
    codes: &'b [Option<Codes>],
}

impl Sink for Writer<'_, '_> {
    fn symbol(&mut self, table: usize, sym: u8) {
        if let Some(c) = &self.codes[table] {
            self.w
                .put(c.code[sym as usize], u32::from(c.size[sym as usize]));
        }
    }
    fn bits(&mut self, value: u32, n: u32) {
        if n > 0 {
            self.w.put(value & ((1 << n) - 1), n);
        }
    }
}

/// An AC scan's pending end-of-band run and the correction bits waiting behind it.
#[derive(Default)]
struct EobRun {
    run: u32,
    be: Vec<u8>,
}

impl EobRun {
    /// jcphuff.c's `emit_eobrun`.
    fn emit<S: Sink>(&mut self, s: &mut S, table: usize) {
        if self.run > 0 {
            let n = 31 - self.run.leading_zeros();
            s.symbol(table, (n << 4) as u8);
            s.bits(self.run, n);
            self.run = 0;
            for &b in &self.be {
                s.bits(u32::from(b), 1);
            }
            self.be.clear();
        }
    }
}

const MAX_CORR_BITS: usize = 1000;

/// The coefficients' sign-and-magnitude after the point transform: |x| >> al.
#[inline(always)]
fn shifted(x: i16, al: u8) -> i32 {
    i32::from(x).abs() >> al
}

fn code_scan<S: Sink>(comps: &[Component], sc: &Scan, s: &mut S) {
    let members: Vec<&Component> = sc.comps.iter().map(|&i| &comps[i]).collect();
    if sc.ss == 0 {
        let mut last = vec![0i32; members.len()];
        scan_order(&members, |i, b| {
            if sc.ah == 0 {
                let v = i32::from(b[0]) >> sc.al;
                let diff = v - last[i];
                last[i] = v;
                let n = nbits(diff);
                s.symbol(members[i].table, n as u8);
                let bits = if diff < 0 { diff - 1 } else { diff };
                s.bits(bits as u32, n);
            } else {
                s.bits((i32::from(b[0]) >> sc.al) as u32 & 1, 1);
            }
        });
        return;
    }
    let table = members[0].table;
    let mut eob = EobRun::default();
    let mut br: Vec<u8> = Vec::with_capacity(64);
    scan_order(&members, |_, b| {
        if sc.ah == 0 {
            let mut r = 0;
            for &x in &b[sc.ss..=sc.se] {
                let v = shifted(x, sc.al);
                if v == 0 {
                    r += 1;
                    continue;
                }
                eob.emit(s, table);
                while r > 15 {
                    s.symbol(table, 0xF0);
                    r -= 16;
                }
                let n = nbits(v);
                s.symbol(table, ((r << 4) + n) as u8);
                s.bits(if x < 0 { !v as u32 } else { v as u32 }, n);
                r = 0;
            }
            if r > 0 {
                eob.run += 1;
                if eob.run == 0x7FFF {
                    eob.emit(s, table);
                }
            }
            return;
        }
        let mut abs = [0i32; 64];
        let mut last_new = 0;
        for k in sc.ss..=sc.se {
            abs[k] = shifted(b[k], sc.al);
            if abs[k] == 1 {
                last_new = k;
            }
        }
        let mut r = 0u32;
        br.clear();
        for k in sc.ss..=sc.se {
            let v = abs[k];
            if v == 0 {
                r += 1;
                continue;
            }
            while r > 15 && k <= last_new {
                eob.emit(s, table);
                s.symbol(table, 0xF0);
                r -= 16;
                for &bit in &br {
                    s.bits(u32::from(bit), 1);
                }
                br.clear();
            }
            if v > 1 {
                br.push((v & 1) as u8);
                continue;
            }
            eob.emit(s, table);
            s.symbol(table, ((r << 4) + 1) as u8);
            s.bits(u32::from(b[k] >= 0), 1);
            for &bit in &br {
                s.bits(u32::from(bit), 1);
            }
            br.clear();
            r = 0;
        }
        if r > 0 || !br.is_empty() {
            eob.run += 1;
            eob.be.extend_from_slice(&br);
            if eob.run == 0x7FFF || eob.be.len() > MAX_CORR_BITS - 64 + 1 {
                eob.emit(s, table);
            }
        }
    });
    eob.emit(s, table);
}

/// Every scan of the script: its optimal tables (DHT), SOS, and its entropy-coded data.
pub(super) fn encode(comps: &[Component], out: &mut Vec<u8>) {
    for sc in script(comps.len()) {
        let dc = sc.ss == 0;
        let mut counts = Counts(vec![[0u64; 256]; 2]);
        let needs_table = !(dc && sc.ah != 0);
        if needs_table {
            code_scan(comps, &sc, &mut counts);
        }
        let mut codes: Vec<Option<Codes>> = vec![None, None];
        for &i in &sc.comps {
            let t = comps[i].table;
            if needs_table && codes[t].is_none() {
                let table = Table::optimal(&counts.0[t]);
                table.write_dht(if dc { t as u8 } else { 0x10 | t as u8 }, out);
                codes[t] = Some(table.codes());
            }
        }
        let len = 6 + 2 * sc.comps.len();
        out.extend_from_slice(&[0xFF, 0xDA, 0, len as u8, sc.comps.len() as u8]);
        for &i in &sc.comps {
            let c = &comps[i];
            let td = if dc && sc.ah == 0 { c.table } else { 0 };
            let ta = if sc.se > 0 { c.table } else { 0 };
            out.extend_from_slice(&[c.id, (td << 4 | ta) as u8]);
        }
        out.extend_from_slice(&[sc.ss as u8, sc.se as u8, sc.ah << 4 | sc.al]);
        let mut w = Writer {
            w: BitWriter::new(out),
            codes: &codes,
        };
        code_scan(comps, &sc, &mut w);
        w.w.finish();
    }
}

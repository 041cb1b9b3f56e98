//! A small ONC RPC v2 codec (RFC 5531) over XDR (RFC 4506), with TCP record
//! marking. Written here rather than linking libtirpc so that the workload
//! needs no C library or portmapper and every byte on the wire is checked: a
//! latency figure from a client that accepts a malformed reply would be
//! meaningless.
//!
//! Only what an echo service needs is supported: AUTH_NONE credentials are
//! sent; any flavour is parsed (and its body bounded) but the server accepts
//! only AUTH_NONE.

use anyhow::{bail, ensure, Context, Result};
use std::io;

pub const RPC_VERS: u32 = 2;

/// `msg_type`.
pub const CALL: u32 = 0;
pub const REPLY: u32 = 1;

/// `reply_stat`.
pub const MSG_ACCEPTED: u32 = 0;
pub const MSG_DENIED: u32 = 1;

/// `accept_stat`.
pub const SUCCESS: u32 = 0;
pub const PROG_UNAVAIL: u32 = 1;
pub const PROG_MISMATCH: u32 = 2;
pub const PROC_UNAVAIL: u32 = 3;
pub const GARBAGE_ARGS: u32 = 4;
pub const SYSTEM_ERR: u32 = 5;

/// `reject_stat`.
pub const RPC_MISMATCH: u32 = 0;
pub const AUTH_ERROR: u32 = 1;

/// `auth_flavor` / `auth_stat` values used here.
pub const AUTH_NONE: u32 = 0;
pub const AUTH_REJECTEDCRED: u32 = 2;

/// RFC 5531 caps an opaque_auth body at 400 bytes.
pub const MAX_AUTH_BYTES: usize = 400;

/// Bit 31 of a record-marking header: this fragment ends the record.
pub const LAST_FRAGMENT: u32 = 0x8000_0000;

/// Appends XDR items to a buffer.
pub struct XdrWriter<'a>(pub &'a mut Vec<u8>);

impl XdrWriter<'_> {
    pub fn put_u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }

    /// Variable-length opaque: length, bytes, zero padding to 4.
    pub fn put_opaque(&mut self, data: &[u8]) -> Result<&mut Self> {
        let len = u32::try_from(data.len()).context("XDR opaque longer than 2^32-1 bytes")?;
        self.put_u32(len);
        self.0.extend_from_slice(data);
        self.0.resize(self.0.len() + pad(data.len()), 0);
        Ok(self)
    }

    pub fn put_auth(&mut self, auth: &Auth<'_>) -> Result<&mut Self> {
        ensure!(
            auth.body.len() <= MAX_AUTH_BYTES,
            "auth body of {} bytes exceeds {MAX_AUTH_BYTES}",
            auth.body.len()
        );
        self.put_u32(auth.flavor);
        self.put_opaque(auth.body)
    }
}

fn pad(len: usize) -> usize {
    (4 - len % 4) % 4
}

/// Reads XDR items from a buffer, failing (never panicking) on short input.
pub struct XdrReader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> XdrReader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        XdrReader { buf, pos: 0 }
    }

    pub fn get_u32(&mut self) -> Result<u32> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// Variable-length opaque of at most `max` bytes; the padding must be zero.
    pub fn get_opaque(&mut self, max: usize) -> Result<&'a [u8]> {
        let len = self.get_u32()? as usize;
        ensure!(len <= max, "XDR opaque of {len} bytes exceeds {max}");
        let data = self.take(len)?;
        let padding = self.take(pad(len))?;
        ensure!(
            padding.iter().all(|&b| b == 0),
            "XDR opaque padding not zero"
        );
        Ok(data)
    }

    pub fn get_auth(&mut self) -> Result<Auth<'a>> {
        let flavor = self.get_u32()?;
        let body = self.get_opaque(MAX_AUTH_BYTES)?;
        Ok(Auth { flavor, body })
    }

    /// Everything not yet read (a procedure's arguments or results).
    pub fn rest(&mut self) -> &'a [u8] {
        let r = &self.buf[self.pos..];
        self.pos = self.buf.len();
        r
    }

    pub fn finish(&self) -> Result<()> {
        ensure!(
            self.pos == self.buf.len(),
            "{} trailing bytes after XDR data",
            self.buf.len() - self.pos
        );
        Ok(())
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.buf.len());
        let Some(end) = end else {
            bail!(
                "XDR data truncated: need {n} bytes at offset {}, have {}",
                self.pos,
                self.buf.len() - self.pos
            );
        };
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Auth<'a> {
    pub flavor: u32,
    pub body: &'a [u8],
}

pub const AUTH_NONE_BODY: Auth<'static> = Auth {
    flavor: AUTH_NONE,
    body: &[],
};

/// A decoded call whose header is RPC version 2.
#[derive(Debug, PartialEq, Eq)]
pub struct Call<'a> {
    pub xid: u32,
    pub prog: u32,
    pub vers: u32,
    pub proc_: u32,
    pub cred: Auth<'a>,
    pub verf: Auth<'a>,
    pub args: &'a [u8],
}

/// What a server can make of a message. A call of another RPC version
/// cannot be parsed past its version field but still deserves an
/// RPC_MISMATCH reply.
#[derive(Debug, PartialEq, Eq)]
pub enum Incoming<'a> {
    Call(Call<'a>),
    WrongVersion { xid: u32, rpcvers: u32 },
}

/// Appends a call message with AUTH_NONE credential and verifier.
pub fn encode_call(
    out: &mut Vec<u8>,
    xid: u32,
    prog: u32,
    vers: u32,
    proc_: u32,
    args: &[u8],
) -> Result<()> {
    let mut w = XdrWriter(out);
    w.put_u32(xid)
        .put_u32(CALL)
        .put_u32(RPC_VERS)
        .put_u32(prog)
        .put_u32(vers)
        .put_u32(proc_);
    w.put_auth(&AUTH_NONE_BODY)?.put_auth(&AUTH_NONE_BODY)?;
    w.0.extend_from_slice(args);
    Ok(())
}

pub fn decode_call(buf: &[u8]) -> Result<Incoming<'_>> {
    let mut r = XdrReader::new(buf);
    let xid = r.get_u32().context("RPC call header")?;
    let mtype = r.get_u32().context("RPC call header")?;
    ensure!(
        mtype == CALL,
        "RPC message type {mtype} where a CALL (0) was expected"
    );
    let rpcvers = r.get_u32().context("RPC call header")?;
    if rpcvers != RPC_VERS {
        return Ok(Incoming::WrongVersion { xid, rpcvers });
    }
    let prog = r.get_u32().context("RPC call header")?;
    let vers = r.get_u32().context("RPC call header")?;
    let proc_ = r.get_u32().context("RPC call header")?;
    let cred = r.get_auth().context("RPC call credential")?;
    let verf = r.get_auth().context("RPC call verifier")?;
    Ok(Incoming::Call(Call {
        xid,
        prog,
        vers,
        proc_,
        cred,
        verf,
        args: r.rest(),
    }))
}

/// The outcome a server reports for an accepted call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Accepted<'a> {
    Success(&'a [u8]),
    ProgUnavail,
    ProgMismatch { low: u32, high: u32 },
    ProcUnavail,
    GarbageArgs,
    SystemErr,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rejected {
    RpcMismatch { low: u32, high: u32 },
    AuthError(u32),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplyBody<'a> {
    Accepted { verf: Auth<'a>, stat: Accepted<'a> },
    Denied(Rejected),
}

pub fn encode_reply(out: &mut Vec<u8>, xid: u32, body: &ReplyBody<'_>) -> Result<()> {
    let mut w = XdrWriter(out);
    w.put_u32(xid).put_u32(REPLY);
    match body {
        ReplyBody::Accepted { verf, stat } => {
            w.put_u32(MSG_ACCEPTED).put_auth(verf)?;
            match stat {
                Accepted::Success(results) => {
                    w.put_u32(SUCCESS);
                    w.0.extend_from_slice(results);
                }
                Accepted::ProgUnavail => {
                    w.put_u32(PROG_UNAVAIL);
                }
                Accepted::ProgMismatch { low, high } => {
                    w.put_u32(PROG_MISMATCH).put_u32(*low).put_u32(*high);
                }
                Accepted::ProcUnavail => {
                    w.put_u32(PROC_UNAVAIL);
                }
                Accepted::GarbageArgs => {
                    w.put_u32(GARBAGE_ARGS);
                }
                Accepted::SystemErr => {
                    w.put_u32(SYSTEM_ERR);
                }
            }
        }
        ReplyBody::Denied(rej) => {
            w.put_u32(MSG_DENIED);
            match rej {
                Rejected::RpcMismatch { low, high } => {
                    w.put_u32(RPC_MISMATCH).put_u32(*low).put_u32(*high);
                }
                Rejected::AuthError(stat) => {
                    w.put_u32(AUTH_ERROR).put_u32(*stat);
                }
            }
        }
    }
    Ok(())
}

/// Decodes a reply message into its xid and body. Status codes outside
/// RFC 5531's enums are errors, as are trailing bytes after a non-success
/// body.
pub fn decode_reply(buf: &[u8]) -> Result<(u32, ReplyBody<'_>)> {
    let mut r = XdrReader::new(buf);
    let xid = r.get_u32().context("RPC reply header")?;
    let mtype = r.get_u32().context("RPC reply header")?;
    ensure!(
        mtype == REPLY,
        "RPC message type {mtype} where a REPLY (1) was expected"
    );
    let body = match r.get_u32().context("RPC reply header")? {
        MSG_ACCEPTED => {
            let verf = r.get_auth().context("RPC reply verifier")?;
            let stat = match r.get_u32().context("RPC accept_stat")? {
                SUCCESS => Accepted::Success(r.rest()),
                PROG_UNAVAIL => Accepted::ProgUnavail,
                PROG_MISMATCH => Accepted::ProgMismatch {
                    low: r.get_u32()?,
                    high: r.get_u32()?,
                },
                PROC_UNAVAIL => Accepted::ProcUnavail,
                GARBAGE_ARGS => Accepted::GarbageArgs,
                SYSTEM_ERR => Accepted::SystemErr,
                other => bail!("RPC accept_stat {other} is not defined by RFC 5531"),
            };
            ReplyBody::Accepted { verf, stat }
        }
        MSG_DENIED => match r.get_u32().context("RPC reject_stat")? {
            RPC_MISMATCH => ReplyBody::Denied(Rejected::RpcMismatch {
                low: r.get_u32()?,
                high: r.get_u32()?,
            }),
            AUTH_ERROR => ReplyBody::Denied(Rejected::AuthError(r.get_u32()?)),
            other => bail!("RPC reject_stat {other} is not defined by RFC 5531"),
        },
        other => bail!("RPC reply_stat {other} is neither MSG_ACCEPTED nor MSG_DENIED"),
    };
    r.finish()?;
    Ok((xid, body))
}

/// Checks that `buf` is the successful reply to call `xid` and returns the
/// procedure's results.
pub fn expect_success(buf: &[u8], xid: u32) -> Result<&[u8]> {
    let (got, body) = decode_reply(buf)?;
    ensure!(
        got == xid,
        "RPC reply xid {got:#x} does not match call xid {xid:#x}"
    );
    match body {
        ReplyBody::Accepted {
            stat: Accepted::Success(results),
            ..
        } => Ok(results),
        other => bail!("RPC call {xid:#x} failed: {other:?}"),
    }
}

/// Starts a record-marked message: reserves the 4-byte fragment header.
pub fn begin_record(out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(&[0; 4]);
}

/// Fills in the header reserved by [`begin_record`], sending the message as
/// one last fragment.
pub fn end_record(out: &mut [u8]) -> Result<()> {
    ensure!(out.len() >= 4, "record has no header");
    let len = u32::try_from(out.len() - 4)
        .ok()
        .filter(|&l| l < LAST_FRAGMENT)
        .context("record fragment longer than 2^31-1 bytes")?;
    out[..4].copy_from_slice(&(LAST_FRAGMENT | len).to_be_bytes());
    Ok(())
}

/// Reassembles record-marked messages from a byte stream. Reads are
/// buffered so that a small message costs one read, as in libtirpc's
/// xdrrec; records above `max` bytes are refused so that a corrupt length
/// cannot make the reader allocate without bound.
pub struct RecordReader {
    buf: Vec<u8>,
    start: usize,
    end: usize,
    max: usize,
}

impl RecordReader {
    pub fn new(max: usize) -> Self {
        RecordReader {
            buf: vec![0; 8192],
            start: 0,
            end: 0,
            max,
        }
    }

    /// Reads one whole record into `out` (cleared first), calling `read` as
    /// often as needed. Returns false on end of stream at a record boundary;
    /// end of stream inside a record is an error.
    pub fn read_record(
        &mut self,
        out: &mut Vec<u8>,
        mut read: impl FnMut(&mut [u8]) -> io::Result<usize>,
    ) -> Result<bool> {
        out.clear();
        loop {
            if !self.fill(4, &mut read)? {
                ensure!(
                    out.is_empty() && self.start == self.end,
                    "stream ended inside an RPC record"
                );
                return Ok(false);
            }
            let h = &self.buf[self.start..self.start + 4];
            let header = u32::from_be_bytes([h[0], h[1], h[2], h[3]]);
            let len = (header & !LAST_FRAGMENT) as usize;
            ensure!(
                out.len() + len <= self.max,
                "RPC record of more than {} bytes refused",
                self.max
            );
            self.start += 4;
            // Copy the fragment through in buffer-sized pieces.
            let mut left = len;
            while left > 0 {
                ensure!(
                    self.fill(1, &mut read)?,
                    "stream ended inside an RPC record"
                );
                let n = left.min(self.end - self.start);
                out.extend_from_slice(&self.buf[self.start..self.start + n]);
                self.start += n;
                left -= n;
            }
            if header & LAST_FRAGMENT != 0 {
                return Ok(true);
            }
        }
    }

    /// Makes at least `want` (≤ buffer size) bytes available; false on end of
    /// stream before any byte of them arrived.
    fn fill(
        &mut self,
        want: usize,
        read: &mut impl FnMut(&mut [u8]) -> io::Result<usize>,
    ) -> Result<bool> {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
        while self.end - self.start < want {
            if self.buf.len() - self.start < want {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            }
            let n = read(&mut self.buf[self.end..]).context("reading an RPC record")?;
            if n == 0 {
                ensure!(self.end == self.start, "stream ended inside an RPC record");
                return Ok(false);
            }
            self.end += n;
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROG: u32 = 0x2000_4b53;

    /// RFC 5531 §9 call body, word by word: xid, CALL, rpcvers, prog, vers,
    /// proc, cred {AUTH_NONE, len 0}, verf {AUTH_NONE, len 0}, then one XDR
    /// unsigned int argument.
    fn call_bytes() -> Vec<u8> {
        let words: [u32; 11] = [0x0102_0304, 0, 2, PROG, 1, 1, 0, 0, 0, 0, 0xdead_beef];
        words.iter().flat_map(|w| w.to_be_bytes()).collect()
    }

    #[test]
    fn call_matches_rfc_layout() {
        let mut out = Vec::new();
        encode_call(
            &mut out,
            0x0102_0304,
            PROG,
            1,
            1,
            &0xdead_beefu32.to_be_bytes(),
        )
        .unwrap();
        assert_eq!(out, call_bytes());
        assert_eq!(out.len(), 44);
        assert_eq!(&out[..8], &[1, 2, 3, 4, 0, 0, 0, 0]);
        let Incoming::Call(c) = decode_call(&out).unwrap() else {
            panic!("not a call")
        };
        assert_eq!(
            c,
            Call {
                xid: 0x0102_0304,
                prog: PROG,
                vers: 1,
                proc_: 1,
                cred: AUTH_NONE_BODY,
                verf: AUTH_NONE_BODY,
                args: &[0xde, 0xad, 0xbe, 0xef],
            }
        );
    }

    #[test]
    fn success_reply_matches_rfc_layout() {
        let mut out = Vec::new();
        let body = ReplyBody::Accepted {
            verf: AUTH_NONE_BODY,
            stat: Accepted::Success(&[0xde, 0xad, 0xbe, 0xef]),
        };
        encode_reply(&mut out, 7, &body).unwrap();
        #[rustfmt::skip]
        let expected = [
            0, 0, 0, 7,       // xid
            0, 0, 0, 1,       // REPLY
            0, 0, 0, 0,       // MSG_ACCEPTED
            0, 0, 0, 0,       // verf flavour AUTH_NONE
            0, 0, 0, 0,       // verf body length 0
            0, 0, 0, 0,       // SUCCESS
            0xde, 0xad, 0xbe, 0xef,
        ];
        assert_eq!(out, expected);
        assert_eq!(decode_reply(&out).unwrap(), (7, body));
        assert_eq!(expect_success(&out, 7).unwrap(), &[0xde, 0xad, 0xbe, 0xef]);
        assert!(expect_success(&out, 8).is_err(), "xid mismatch accepted");
    }

    #[test]
    fn error_replies_round_trip_and_fail_calls() {
        #[rustfmt::skip]
        let cases: [(ReplyBody, &[u8]); 4] = [
            (
                ReplyBody::Denied(Rejected::RpcMismatch { low: 2, high: 2 }),
                &[0, 0, 0, 9, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 2],
            ),
            (
                ReplyBody::Denied(Rejected::AuthError(AUTH_REJECTEDCRED)),
                &[0, 0, 0, 9, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 2],
            ),
            (
                ReplyBody::Accepted {
                    verf: AUTH_NONE_BODY,
                    stat: Accepted::ProgMismatch { low: 1, high: 3 },
                },
                &[0, 0, 0, 9, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                  0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 3],
            ),
            (
                ReplyBody::Accepted {
                    verf: AUTH_NONE_BODY,
                    stat: Accepted::GarbageArgs,
                },
                &[0, 0, 0, 9, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4],
            ),
        ];
        for (body, bytes) in cases {
            let mut out = Vec::new();
            encode_reply(&mut out, 9, &body).unwrap();
            assert_eq!(out, bytes, "{body:?}");
            assert_eq!(decode_reply(bytes).unwrap(), (9, body));
            assert!(
                expect_success(bytes, 9).is_err(),
                "{body:?} taken as success"
            );
        }
    }

    #[test]
    fn malformed_messages_are_rejected() {
        let call = call_bytes();
        // Truncated anywhere in the header.
        for cut in 0..36 {
            assert!(decode_call(&call[..cut]).is_err(), "cut at {cut}");
        }
        // A reply where a call is expected, and the reverse.
        let mut reply = Vec::new();
        encode_reply(
            &mut reply,
            1,
            &ReplyBody::Accepted {
                verf: AUTH_NONE_BODY,
                stat: Accepted::Success(&[]),
            },
        )
        .unwrap();
        assert!(decode_call(&reply).is_err());
        assert!(decode_reply(&call).is_err());
        // Undefined reply_stat / accept_stat values.
        let mut bad = reply.clone();
        bad[11] = 2;
        assert!(decode_reply(&bad).is_err());
        let mut bad = reply.clone();
        bad[23] = 6;
        assert!(decode_reply(&bad).is_err());
        // A verifier longer than RFC 5531 allows.
        let mut bad = reply[..16].to_vec();
        bad.extend_from_slice(&401u32.to_be_bytes());
        bad.extend(std::iter::repeat_n(0, 404));
        assert!(decode_reply(&bad).is_err());
        // Trailing bytes after a denial.
        let mut out = Vec::new();
        encode_reply(&mut out, 1, &ReplyBody::Denied(Rejected::AuthError(1))).unwrap();
        out.push(0);
        assert!(decode_reply(&out).is_err());
        // Another RPC version is reported, not misparsed.
        let mut v3 = call.clone();
        v3[11] = 3;
        assert_eq!(
            decode_call(&v3).unwrap(),
            Incoming::WrongVersion {
                xid: 0x0102_0304,
                rpcvers: 3
            }
        );
    }

    #[test]
    fn opaque_is_padded_and_checked() {
        let mut out = Vec::new();
        XdrWriter(&mut out).put_opaque(b"abcde").unwrap();
        assert_eq!(out, [0, 0, 0, 5, b'a', b'b', b'c', b'd', b'e', 0, 0, 0]);
        let mut r = XdrReader::new(&out);
        assert_eq!(r.get_opaque(8).unwrap(), b"abcde");
        r.finish().unwrap();
        assert!(XdrReader::new(&out).get_opaque(4).is_err(), "max ignored");
        let mut bad = out.clone();
        bad[11] = 1;
        assert!(
            XdrReader::new(&bad).get_opaque(8).is_err(),
            "padding ignored"
        );
        assert!(XdrReader::new(&out[..10]).get_opaque(8).is_err());
        let mut auth = Vec::new();
        let big = [0u8; MAX_AUTH_BYTES + 1];
        assert!(XdrWriter(&mut auth)
            .put_auth(&Auth {
                flavor: 1,
                body: &big
            })
            .is_err());
    }

    /// Feeds `data` to a reader at most `chunk` bytes per read.
    fn reader(data: &[u8], chunk: usize) -> impl FnMut(&mut [u8]) -> io::Result<usize> + '_ {
        let mut pos = 0;
        move |buf: &mut [u8]| {
            let n = chunk.min(buf.len()).min(data.len() - pos);
            buf[..n].copy_from_slice(&data[pos..pos + n]);
            pos += n;
            Ok(n)
        }
    }

    #[test]
    fn record_marking() {
        let mut rec = Vec::new();
        begin_record(&mut rec);
        rec.extend_from_slice(&call_bytes());
        end_record(&mut rec).unwrap();
        assert_eq!(&rec[..4], &[0x80, 0, 0, 44]);

        // Two records, the first in two fragments, read whole and a byte at a time.
        let mut stream = vec![0, 0, 0, 2, b'a', b'b', 0x80, 0, 0, 1, b'c'];
        stream.extend_from_slice(&rec);
        for chunk in [1, 3, 10_000] {
            let mut rr = RecordReader::new(1024);
            let mut src = reader(&stream, chunk);
            let mut out = Vec::new();
            assert!(rr.read_record(&mut out, &mut src).unwrap());
            assert_eq!(out, b"abc");
            assert!(rr.read_record(&mut out, &mut src).unwrap());
            assert_eq!(out, call_bytes());
            assert!(!rr.read_record(&mut out, &mut src).unwrap(), "no clean EOF");
        }

        // A record larger than the internal buffer.
        let big: Vec<u8> = (0..20_000u32).map(|i| i as u8).collect();
        let mut rec2 = Vec::new();
        begin_record(&mut rec2);
        rec2.extend_from_slice(&big);
        end_record(&mut rec2).unwrap();
        let mut out = Vec::new();
        assert!(RecordReader::new(1 << 20)
            .read_record(&mut out, reader(&rec2, 5000))
            .unwrap());
        assert_eq!(out, big);

        // Truncation inside the header or the body, and an oversized record.
        for cut in [2, 10, rec.len() - 1] {
            let mut out = Vec::new();
            assert!(
                RecordReader::new(1024)
                    .read_record(&mut out, reader(&rec[..cut], 7))
                    .is_err(),
                "cut at {cut}"
            );
        }
        let mut out = Vec::new();
        assert!(RecordReader::new(16)
            .read_record(&mut out, reader(&rec, 64))
            .is_err());
    }
}

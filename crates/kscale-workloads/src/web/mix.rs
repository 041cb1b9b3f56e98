//! SPECweb99's request mix: kinds, classes, Zipf-chosen directories and files.

use super::fileset::FILES_PER_CLASS;
use anyhow::{bail, Result};
use std::io::Write;

/// Static requests per class, SPECweb99's 35/50/14/1 %.
pub(super) const CLASS_SHARE: [f64; 4] = [0.35, 0.50, 0.14, 0.01];

/// [`super::file_path`] written straight into a request, without a String.
pub(super) struct FilePath<'a>(&'a Request);

impl std::fmt::Display for FilePath<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let r = self.0;
        write!(f, "/dir{:05}/class{}_{}", r.dir, r.class, r.file)
    }
}

/// The workspace's SplitMix64 (`kscale_core::order`): small, fast, and the
/// same everywhere, so a seed names one file set and one request sequence.
/// The seed is offset as it always was, so seeds name the sets they named.
#[derive(Clone, Debug)]
pub struct Rng(kscale_core::order::SplitMix64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(kscale_core::order::SplitMix64::new(
            seed ^ 0x9e37_79b9_7f4a_7c15,
        ))
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }
    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

// ------------------------------------------------------------- request mix

/// Cumulative weights of a Zipf(α = 1) choice over `n` ranks: rank i (from
/// 0) is chosen with probability ∝ 1/(i+1).
#[derive(Clone, Debug)]
pub struct Zipf(Vec<f64>);

impl Zipf {
    pub fn new(n: usize) -> Zipf {
        let mut acc = 0.0;
        let mut cdf: Vec<f64> = (1..=n.max(1))
            .map(|i| {
                acc += 1.0 / i as f64;
                acc
            })
            .collect();
        for c in cdf.iter_mut() {
            *c /= acc;
        }
        Zipf(cdf)
    }
    pub fn pick(&self, u: f64) -> usize {
        self.0
            .partition_point(|c| *c <= u)
            .min(self.0.len().saturating_sub(1))
    }
}

/// The kinds of SPECweb99 request, with their shares of the full mix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Static,
    DynGet,
    Cookie,
    Post,
    Cgi,
}

pub const KIND_SHARE: [(Kind, f64); 5] = [
    (Kind::Static, 0.70),
    (Kind::DynGet, 0.1245),
    (Kind::Cookie, 0.126),
    (Kind::Post, 0.048),
    (Kind::Cgi, 0.0015),
];

/// What requests to issue, from the `mix` param.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MixKind {
    Specweb,
    Static,
    Class(usize),
}

impl MixKind {
    pub fn parse(s: &str) -> Result<MixKind> {
        Ok(match s {
            "specweb" => MixKind::Specweb,
            "static" => MixKind::Static,
            "class0" => MixKind::Class(0),
            "class1" => MixKind::Class(1),
            "class2" => MixKind::Class(2),
            "class3" => MixKind::Class(3),
            _ => bail!("mix={s}: accepted: specweb, static, class0…class3"),
        })
    }
}

/// One generated request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub kind: Kind,
    pub dir: u64,
    pub class: usize,
    pub file: u64,
}

/// Generates a connection's request sequence.
pub struct Mix {
    kind: MixKind,
    dirs: Zipf,
    files: Zipf,
    rng: Rng,
    user: u64,
    /// The URL path the file set is served under ("" = the root).
    base: String,
    /// The prefix of the dynamic kinds' paths (`{dynamic}/dyn`, `/ad`,
    /// `/post`, `/cgi`).
    dynamic: String,
}

impl Mix {
    pub fn new(kind: MixKind, dirs: u64, seed: u64) -> Mix {
        Mix {
            kind,
            dirs: Zipf::new(dirs as usize),
            files: Zipf::new(FILES_PER_CLASS as usize),
            rng: Rng::new(seed),
            user: seed % 10_000,
            base: String::new(),
            dynamic: String::new(),
        }
    }

    /// Serves the static files from under `base` and sends the dynamic
    /// kinds to paths under `dynamic` (both without a trailing `/`).
    pub fn with_paths(mut self, base: &str, dynamic: &str) -> Mix {
        self.base = base.trim_end_matches('/').to_string();
        self.dynamic = dynamic.trim_end_matches('/').to_string();
        self
    }

    pub fn pick(&mut self) -> Request {
        let kind = match self.kind {
            MixKind::Specweb => {
                let u = self.rng.unit();
                let mut acc = 0.0;
                let mut k = Kind::Static;
                for (kind, share) in KIND_SHARE {
                    acc += share;
                    k = kind;
                    if u < acc {
                        break;
                    }
                }
                k
            }
            _ => Kind::Static,
        };
        let class = match self.kind {
            MixKind::Class(c) => c,
            _ => {
                let u = self.rng.unit();
                let mut acc = 0.0;
                let mut c = 3;
                for (i, share) in CLASS_SHARE.iter().enumerate() {
                    acc += share;
                    if u < acc {
                        c = i;
                        break;
                    }
                }
                c
            }
        };
        let dir = self.dirs.pick(self.rng.unit()) as u64;
        let file = self.files.pick(self.rng.unit()) as u64 + 1;
        Request {
            kind,
            dir,
            class,
            file,
        }
    }

    /// The request's bytes on the wire. Dynamic kinds go to the locations
    /// the server's configuration defines for them (see [`nginx_conf`]).
    pub fn encode(&self, r: &Request, out: &mut Vec<u8>) {
        out.clear();
        let path = FilePath(r);
        let u = self.user;
        let (b, d) = (&self.base, &self.dynamic);
        let _ = match r.kind {
            Kind::Static => write!(out, "GET {b}{path} HTTP/1.1\r\nHost: kscale\r\n\r\n"),
            Kind::DynGet => write!(
                out,
                "GET {d}/dyn?file={path}&user={u} HTTP/1.1\r\nHost: kscale\r\n\r\n"
            ),
            Kind::Cookie => write!(
                out,
                "GET {d}/ad?file={path} HTTP/1.1\r\nHost: kscale\r\n\
                 Cookie: my_cookie=user_id={u}&last_ad={}\r\n\r\n",
                r.dir % 360
            ),
            Kind::Cgi => write!(
                out,
                "GET {d}/cgi?file={path}&user={u} HTTP/1.1\r\nHost: kscale\r\n\r\n"
            ),
            Kind::Post => {
                let body = format!(
                    "urlroot=/&dir={}&class={}&num={}&client={u}",
                    r.dir, r.class, r.file
                );
                write!(
                    out,
                    "POST {d}/post HTTP/1.1\r\nHost: kscale\r\n\
                     Content-Type: application/x-www-form-urlencoded\r\n\
                     Content-Length: {}\r\n\r\n{body}",
                    body.len()
                )
            }
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pearson's chi-square statistic of observed counts against expected
    /// probabilities.
    fn chi2(obs: &[u64], p: &[f64]) -> f64 {
        let n: u64 = obs.iter().sum();
        obs.iter()
            .zip(p)
            .map(|(o, p)| {
                let e = p * n as f64;
                (*o as f64 - e).powi(2) / e
            })
            .sum()
    }

    #[test]
    fn request_mix_matches_specweb99_proportions() {
        let mut m = Mix::new(MixKind::Specweb, 20, 42);
        let n = 100_000;
        let (mut kinds, mut classes) = ([0u64; 5], [0u64; 4]);
        let mut dirs = vec![0u64; 20];
        let mut files = [0u64; 9];
        for _ in 0..n {
            let r = m.pick();
            let k = KIND_SHARE.iter().position(|(k, _)| *k == r.kind).unwrap();
            kinds[k] += 1;
            classes[r.class] += 1;
            dirs[r.dir as usize] += 1;
            files[(r.file - 1) as usize] += 1;
        }
        let kp: Vec<f64> = KIND_SHARE.iter().map(|(_, p)| *p).collect();
        // 99.9 % critical values: 4 dof 18.47, 3 dof 16.27, 19 dof 43.82, 8 dof 26.12.
        assert!(chi2(&kinds, &kp) < 18.47, "{kinds:?}");
        assert!(chi2(&classes, &CLASS_SHARE) < 16.27, "{classes:?}");
        let zipf = |n: usize| {
            let h: f64 = (1..=n).map(|i| 1.0 / i as f64).sum();
            (1..=n).map(|i| 1.0 / i as f64 / h).collect::<Vec<_>>()
        };
        assert!(chi2(&dirs, &zipf(20)) < 43.82, "{dirs:?}");
        assert!(chi2(&files, &zipf(9)) < 26.12, "{files:?}");
        // A wrong distribution fails the same test.
        assert!(chi2(&files, &[1.0 / 9.0; 9]) > 26.12);
    }

    #[test]
    fn single_class_mix_is_static_of_that_class() {
        let mut m = Mix::new(MixKind::Class(2), 5, 1);
        for _ in 0..1000 {
            let r = m.pick();
            assert_eq!((r.kind, r.class), (Kind::Static, 2));
            assert!(r.dir < 5 && (1..=9).contains(&r.file));
        }
        let mut s = Mix::new(MixKind::Static, 5, 1);
        assert!((0..1000).all(|_| s.pick().kind == Kind::Static));
    }

    #[test]
    fn same_seed_same_sequence() {
        let mut a = Mix::new(MixKind::Specweb, 50, 7);
        let mut b = Mix::new(MixKind::Specweb, 50, 7);
        let mut c = Mix::new(MixKind::Specweb, 50, 8);
        let sa: Vec<Request> = (0..100).map(|_| a.pick()).collect();
        let sb: Vec<Request> = (0..100).map(|_| b.pick()).collect();
        let sc: Vec<Request> = (0..100).map(|_| c.pick()).collect();
        assert_eq!(sa, sb);
        assert_ne!(sa, sc);
    }

    #[test]
    fn requests_are_well_formed_http() {
        let m = Mix::new(MixKind::Specweb, 3, 1);
        let mut buf = Vec::new();
        for kind in [
            Kind::Static,
            Kind::DynGet,
            Kind::Cookie,
            Kind::Post,
            Kind::Cgi,
        ] {
            let r = Request {
                kind,
                dir: 2,
                class: 1,
                file: 4,
            };
            m.encode(&r, &mut buf);
            let mut h = [httparse::EMPTY_HEADER; 16];
            let mut req = httparse::Request::new(&mut h);
            let httparse::Status::Complete(n) = req.parse(&buf).unwrap() else {
                panic!("partial {kind:?}")
            };
            if kind == Kind::Post {
                assert_eq!(req.path, Some("/post"));
                assert!(String::from_utf8_lossy(&buf[n..]).contains("dir=2&class=1&num=4"));
                let cl: usize = req
                    .headers
                    .iter()
                    .find(|h| h.name == "Content-Length")
                    .map(|h| std::str::from_utf8(h.value).unwrap().parse().unwrap())
                    .unwrap();
                assert_eq!(buf.len() - n, cl);
            } else {
                assert!(req.path.unwrap().contains("/dir00002/class1_4"), "{kind:?}");
                assert_eq!(n, buf.len());
            }
        }
    }

    #[test]
    fn zipf_picks_within_range() {
        let z = Zipf::new(3);
        assert_eq!(z.pick(0.0), 0);
        assert_eq!(z.pick(0.999_999), 2);
        assert_eq!(Zipf::new(1).pick(0.5), 0);
    }
}

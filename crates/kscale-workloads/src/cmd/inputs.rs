//! The inputs of the command lines, generated into a trial's scratch
//! directory from a fixed seed, so that every run on every kernel times the
//! same bytes: the PTS set ships its own files, kscale writes its own
//! (docs/families/cmd.md lists them).

use super::table::Input;
use anyhow::{ensure, Context, Result};
use std::fmt::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

pub const HOME: &str = "home";
pub const TMP: &str = "tmp";
pub const MAILRC: &str = "mailrc";

/// The seed of every generated file.
const SEED: u64 = 0x6b73_6361_6c65_0003;

/// The workspace's SplitMix64 (`kscale_core::order`): small, fast and the
/// same everywhere, which is all the inputs need from a generator. `below`
/// keeps its modulo, so the generated files stay the ones measured.
struct Rng(kscale_core::order::SplitMix64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0.next_u64()
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }
}

/// Words of the text files. The patterns of the table's grep lines
/// (`confidence`, `the`, `kernel`, `alpha|omega`) occur; `laban` only in a
/// few lines of large.txt, capitalised, for the case-insensitive search.
const WORDS: &[&str] = &[
    "the",
    "a",
    "kernel",
    "process",
    "file",
    "system",
    "memory",
    "page",
    "cache",
    "thread",
    "signal",
    "pipe",
    "socket",
    "network",
    "driver",
    "device",
    "block",
    "inode",
    "directory",
    "mount",
    "buffer",
    "queue",
    "lock",
    "spin",
    "mutex",
    "schedule",
    "timer",
    "interrupt",
    "confidence",
    "measure",
    "trial",
    "mean",
    "median",
    "interval",
    "alpha",
    "omega",
    "linux",
    "version",
    "release",
    "patch",
    "merge",
    "branch",
    "commit",
    "review",
    "benchmark",
    "latency",
    "throughput",
    "scale",
    "processor",
    "core",
    "cycle",
    "instruction",
    "branches",
    "table",
    "command",
    "shell",
    "script",
    "archive",
    "compress",
    "editor",
    "line",
    "word",
    "character",
    "number",
];

fn words(rng: &mut Rng, n: usize, out: &mut String) {
    for i in 0..n {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(WORDS[rng.below(WORDS.len())]);
    }
}

fn text_lines(rng: &mut Rng, lines: usize, lo: usize, hi: usize) -> String {
    let mut s = String::new();
    for _ in 0..lines {
        let n = rng.range(lo, hi);
        words(rng, n, &mut s);
        s.push('\n');
    }
    s
}

/// Text of at least `bytes` bytes, whole lines.
fn text_bytes(rng: &mut Rng, bytes: usize) -> String {
    let mut s = String::new();
    while s.len() < bytes {
        let n = rng.range(4, 12);
        words(rng, n, &mut s);
        s.push('\n');
    }
    s
}

fn c_function(rng: &mut Rng, name: &str, s: &mut String) {
    let _ = writeln!(
        s,
        "int {name}(int n)\n{{\n    int acc = {};",
        rng.below(100)
    );
    for i in 0..rng.range(3, 8) {
        let _ = writeln!(
            s,
            "    for (int i{i} = 0; i{i} < n; i{i}++) {{\n        acc = acc * {} + i{i};\n        if (acc > {}) {{\n            acc -= {};\n        }}\n    }}",
            rng.range(2, 9),
            rng.range(1000, 100000),
            rng.range(10, 999)
        );
    }
    s.push_str("    return acc;\n}\n\n");
}

/// The files made so far and the generator they draw from. Each group of
/// files draws from the one generator in turn, so the order of the calls in
/// `text_files` fixes every byte.
struct Made {
    rng: Rng,
    files: Vec<(String, Vec<u8>)>,
}

impl Made {
    fn add(&mut self, name: &str, body: String) {
        self.files.push((name.to_string(), body.into_bytes()));
    }
}

/// Every file the command lines read, as (path, bytes), in a fixed order.
pub fn text_files() -> Vec<(String, Vec<u8>)> {
    let mut m = Made {
        rng: Rng(kscale_core::order::SplitMix64::new(SEED)),
        files: Vec::new(),
    };
    large_texts(&mut m);
    numbered_pair(&mut m);
    small_edits(&mut m);
    sized_texts(&mut m);
    join_pair(&mut m);
    c_sources(&mut m);
    tool_inputs(&mut m);
    tree(&mut m);
    m.files
}

/// The large text file, about a megabyte with "Laban" in a few lines for the
/// case-insensitive search, and the 10,000 lines the sorts and copies read.
fn large_texts(m: &mut Made) {
    let mut large = String::new();
    let mut n = 0;
    while large.len() < 1 << 20 {
        let k = m.rng.range(5, 12);
        words(&mut m.rng, k, &mut large);
        n += 1;
        if n % 4000 == 0 {
            large.push_str(" Laban");
        }
        large.push('\n');
    }
    m.add("large.txt", large);

    let l10k = text_lines(&mut m.rng, 10_000, 4, 10);
    m.add("lines10k.copy", l10k.clone());
    m.add("lines10k.txt", l10k);
}

/// The 1,300-line pair for `cmp` and `diff`: numbered lines; the differing
/// file changes every 37th line.
fn numbered_pair(m: &mut Made) {
    let mut a = String::new();
    let mut b = String::new();
    for i in 1..=1300 {
        let mut line = format!("{i:05} ");
        let k = m.rng.range(4, 9);
        words(&mut m.rng, k, &mut line);
        let _ = writeln!(a, "{line}");
        if i % 37 == 0 {
            let mut other = format!("{i:05} changed ");
            let k = m.rng.range(2, 6);
            words(&mut m.rng, k, &mut other);
            let _ = writeln!(b, "{other}");
        } else {
            let _ = writeln!(b, "{line}");
        }
    }
    m.add("a1300copy.txt", a.clone());
    m.add("a1300.txt", a);
    m.add("b1300.txt", b);
}

/// Forty short lines and their edited twins: a few lines changed for `diff`,
/// and a copy that differs only in the amount of white space (`diff -be`).
fn small_edits(m: &mut Made) {
    let small: Vec<String> = (0..40)
        .map(|_| {
            let mut l = String::new();
            let k = m.rng.range(3, 8);
            words(&mut m.rng, k, &mut l);
            l
        })
        .collect();
    m.add("small1.txt", small.join("\n") + "\n");
    let small2: Vec<String> = small
        .iter()
        .enumerate()
        .map(|(i, l)| {
            if [4, 16, 32].contains(&i) {
                format!("{l} edited")
            } else {
                l.clone()
            }
        })
        .collect();
    m.add("small2.txt", small2.join("\n") + "\n");
    m.add("blanks1.txt", small.join("\n") + "\n");
    let spaced: Vec<String> = small
        .iter()
        .enumerate()
        .map(|(i, l)| {
            if i % 3 == 0 {
                format!("{}  ", l.replace(' ', "   "))
            } else {
                l.clone()
            }
        })
        .collect();
    m.add("blanks2.txt", spaced.join("\n") + "\n");
}

/// Text files whose sizes the rows' titles name.
fn sized_texts(m: &mut Made) {
    m.add(
        "tiny.txt",
        "a file of less than one hundred bytes\n".to_string(),
    );
    let t = text_bytes(&mut m.rng, 10_500);
    m.add("f10k.txt", t);
    let t = text_bytes(&mut m.rng, 25_500);
    m.add("f25k.txt", t);
    for name in ["s1.txt", "s2.txt", "s3.txt", "add1.txt"] {
        let t = text_bytes(&mut m.rng, 1500);
        m.add(name, t);
    }
}

/// Two sorted files of keys for `join`, the second holding every other key.
fn join_pair(m: &mut Made) {
    let mut j1 = String::new();
    let mut j2 = String::new();
    for i in 0..1000 {
        let _ = writeln!(j1, "k{i:04} {}", WORDS[m.rng.below(WORDS.len())]);
        if i % 2 == 0 {
            let _ = writeln!(j2, "k{i:04} {}", WORDS[m.rng.below(WORDS.len())]);
        }
    }
    m.add("join1.txt", j1);
    m.add("join2.txt", j2);
}

/// C: a large file, ten small ones to compile and link, one to make.
fn c_sources(m: &mut Made) {
    let mut prog = String::from("/* generated by kscale */\n");
    for i in 0..200 {
        c_function(&mut m.rng, &format!("big_{i}"), &mut prog);
    }
    m.add("prog.c", prog);
    for i in 0..10 {
        let mut s = String::new();
        for k in 0..5 {
            c_function(&mut m.rng, &format!("f{i}_{k}"), &mut s);
        }
        m.add(&format!("src/f{i}.c"), s);
    }
    m.add(
        "hello.c",
        "#include <stdio.h>\n\nint main(void)\n{\n    printf(\"hello\\n\");\n    return 0;\n}\n"
            .to_string(),
    );
    m.add(
        "Makefile",
        "hello.o: hello.c\n\tcc -O0 -c -o hello.o hello.c\n".to_string(),
    );
}

/// What the other tools read: m4, yacc and man input, a shell script, a
/// mail message and its rc file, and the editors' scripts.
fn tool_inputs(m: &mut Made) {
    m.add("test.m4", M4.to_string());
    m.add("gram.y", GRAMMAR.to_string());
    let mut man = String::from(".TH KSCALE 1 \"2002\" \"kscale\" \"kscale inputs\"\n.SH NAME\nkscale \\- a generated page\n");
    for i in 0..120 {
        if i % 10 == 0 {
            let _ = writeln!(man, ".SH SECTION {}", i / 10);
        }
        man.push_str(".PP\n");
        let t = text_bytes(&mut m.rng, 400);
        man.push_str(&t);
    }
    m.add("doc.1", man);
    m.add("script.sh", SCRIPT.to_string());
    m.add(
        "msg.txt",
        "A message from kscale.\nIt is written to a file in the scratch directory.\n".to_string(),
    );
    m.add(MAILRC, "set expandaddr\n".to_string());
    m.add(
        "ex.script",
        "1d\n$a\nadded by kscale\n.\nw\nq\n".to_string(),
    );
    let mut page = String::from("1\n");
    page.push_str(&".+24\n".repeat(30));
    page.push_str(&".-24\n".repeat(30));
    page.push_str("q!\n");
    m.add("page.script", page);
    m.add(
        "small.script",
        "%s/e/E/g\n$a\nappended by kscale\n.\nwq\n".to_string(),
    );
}

/// A directory tree of 4 × 4 directories of 10 files, the list of the first
/// quarter's paths, and the file `find -newer` compares with.
fn tree(m: &mut Made) {
    let mut list = String::new();
    for d in 0..4 {
        for e in 0..4 {
            for k in 0..10 {
                let path = format!("tree/d{d}/e{e}/f{k}.txt");
                if d == 0 {
                    let _ = writeln!(list, "{path}");
                }
                let size = m.rng.range(100, 3000);
                let t = text_bytes(&mut m.rng, size);
                m.add(&path, t);
            }
        }
    }
    m.add("filelist.txt", list);
    m.add(
        "ref.txt",
        "find -newer compares with this file\n".to_string(),
    );
}

/// Writes every input into `work`, then those made with other tools.
pub fn generate(work: &Path, tools: &[Input]) -> Result<()> {
    for d in [HOME, TMP] {
        std::fs::create_dir_all(work.join(d))?;
    }
    for (name, body) in text_files() {
        let path = work.join(&name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, body).with_context(|| format!("cannot write {}", path.display()))?;
    }
    for t in tools {
        match t {
            Input::ArLib => tool(
                work,
                &["ar", "rc", "lib.a", "s1.txt", "s2.txt", "s3.txt"],
                None,
                None,
            )?,
            Input::Tar => tool(work, &["tar", "-cf", "arch.tar", "tree"], None, None)?,
            Input::Cpio => tool(
                work,
                &["cpio", "-o", "--quiet"],
                Some("filelist.txt"),
                Some("arch.cpio"),
            )?,
            Input::Compressed => {
                tool(work, &["compress", "-c", "large.txt"], None, Some("data.Z"))?
            }
            Input::Objects => {
                std::fs::create_dir_all(work.join("obj"))?;
                let mut argv = vec!["cc".to_string(), "-O0".into(), "-c".into()];
                argv.extend((0..10).map(|i| format!("../src/f{i}.c")));
                let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
                tool(&work.join("obj"), &argv, None, None)?;
            }
        }
    }
    Ok(())
}

/// Runs a tool that makes an input; its failure fails the trial with the
/// tool's first line of complaint.
fn tool(dir: &Path, argv: &[&str], stdin: Option<&str>, stdout: Option<&str>) -> Result<()> {
    let mut c = Command::new(argv[0]);
    c.args(&argv[1..])
        .current_dir(dir)
        .env("LC_ALL", "C")
        .stderr(Stdio::piped());
    c.stdin(match stdin {
        Some(f) => Stdio::from(std::fs::File::open(dir.join(f))?),
        None => Stdio::null(),
    });
    c.stdout(match stdout {
        Some(f) => Stdio::from(std::fs::File::create(dir.join(f))?),
        None => Stdio::null(),
    });
    let out = c
        .output()
        .with_context(|| format!("cannot run {} to make an input", argv[0]))?;
    let err = String::from_utf8_lossy(&out.stderr);
    ensure!(
        out.status.success(),
        "making an input with `{}` failed: {}",
        argv.join(" "),
        err.lines().next().unwrap_or("no message")
    );
    Ok(())
}

const M4: &str = "divert(-1)
define(`count', `ifelse(eval($1 > 0), 1, `$1 count(decr($1))')')
define(`square', `eval($1 * $1)')
define(`upper', `translit(`$1', `abcdefghijklmnopqrstuvwxyz', `ABCDEFGHIJKLMNOPQRSTUVWXYZ')')
divert(0)dnl
count(100)
square(12) square(99) eval(2 ** 16) eval(1000 / 7) eval(1000 % 7)
len(`the quick brown fox') index(`the quick brown fox', `brown')
substr(`command line execution time', 8, 4)
upper(`predefined macros of m4')
ifdef(`square', `square is defined', `square is not defined')
incr(41) decr(43)
format(`%5d|%-8s|', 42, `m4')
__file__ __line__
";

const GRAMMAR: &str = "%{
int yylex(void);
void yyerror(const char *s);
%}
%token NUMBER IDENT
%left '+' '-'
%left '*' '/' '%'
%right UMINUS
%%
program : /* empty */
        | program statement ';'
        ;
statement : IDENT '=' expr
          | expr
          | IDENT '(' args ')'
          ;
args : /* empty */
     | expr
     | args ',' expr
     ;
expr : expr '+' expr
     | expr '-' expr
     | expr '*' expr
     | expr '/' expr
     | expr '%' expr
     | '-' expr %prec UMINUS
     | '(' expr ')'
     | NUMBER
     | IDENT
     ;
%%
";

const SCRIPT: &str = r#"# A shell script with functions, loops, arithmetic, case, string
# handling, here-documents and a few external commands.
fib() {
    a=0
    b=1
    i=0
    while [ "$i" -lt "$1" ]; do
        t=$((a + b))
        a=$b
        b=$t
        i=$((i + 1))
    done
    echo "$a"
}
classify() {
    case "$1" in
        *0) echo zero ;;
        *[13579]) echo odd ;;
        *) echo even ;;
    esac
}
total=0
n=0
while [ "$n" -lt 200 ]; do
    c=$(classify "$n")
    case "$c" in
        odd) total=$((total + n)) ;;
        even) total=$((total - n / 2)) ;;
        zero) total=$((total * 2 % 100003)) ;;
    esac
    n=$((n + 1))
done
echo "total $total fib $(fib 40)"
words=""
for w in the kernel process file system memory page cache thread signal; do
    words="$words ${w}s"
done
set -- $words
echo "$# words, first $1, last ${10}"
count=$(wc -l < lines10k.txt)
lines=0
while read -r first rest; do
    lines=$((lines + 1))
    [ "$lines" -ge 300 ] && break
done < lines10k.txt
cat <<END | tr a-z A-Z > script.out
lines $count read $lines total $total
END
sed -n '1,5p' a1300.txt > /dev/null
grep -c kernel a1300.txt > /dev/null
sort small1.txt | uniq -c > /dev/null
rm -f script.out
"#;

#[cfg(test)]
mod tests {
    use super::*;

    /// Two generations give the same bytes, `generate` writes exactly them,
    /// and the files have the sizes the rows' titles name. One test, so the
    /// megabytes are made twice, not once per check.
    #[test]
    fn inputs_are_the_same_every_time_and_the_sizes_rows_name() {
        let a = text_files();
        let b = text_files();
        assert_eq!(a.len(), b.len());
        for ((na, ba), (nb, bb)) in a.iter().zip(&b) {
            assert_eq!(na, nb);
            assert!(ba == bb, "{na} differs between two generations");
        }
        let d = tempfile::tempdir().unwrap();
        generate(d.path(), &[]).unwrap();
        for (name, body) in &a {
            assert!(
                std::fs::read(d.path().join(name)).unwrap() == *body,
                "{name} on disk differs"
            );
        }

        let files: std::collections::HashMap<String, Vec<u8>> = a.into_iter().collect();
        let lines = |n: &str| files[n].iter().filter(|b| **b == b'\n').count();
        assert_eq!(lines("lines10k.txt"), 10_000);
        assert_eq!(lines("a1300.txt"), 1300);
        assert_eq!(lines("b1300.txt"), 1300);
        assert_eq!(files["a1300.txt"], files["a1300copy.txt"]);
        assert_ne!(files["a1300.txt"], files["b1300.txt"]);
        assert!(lines("small1.txt") < 52);
        assert!(files["tiny.txt"].len() < 100);
        assert!(files["f10k.txt"].len() > 10_000);
        assert!(files["f25k.txt"].len() > 25_000);
        assert!(files["large.txt"].len() >= 1 << 20);
        let large = String::from_utf8_lossy(&files["large.txt"]);
        assert!(large.contains("Laban") && large.contains("confidence"));
    }
}

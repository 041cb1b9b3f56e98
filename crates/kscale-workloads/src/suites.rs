//! Named suites: `--suite NAME`.

pub struct Suite {
    pub name: &'static str,
    pub help: &'static str,
    /// Workloads or families.
    pub targets: &'static [&'static str],
}

pub static SUITES: &[Suite] = &[
    Suite {
        name: "micro",
        help: "The lmbench-style micro-benchmarks of seed 003: syscall, ipc, ctx, mem, fs.",
        targets: &["syscall", "ipc", "ctx", "mem", "fs"],
    },
    Suite {
        name: "macro",
        help: "The seeds' macro workloads: a server on the measured CPUs driven by load from \
               the others (or from `kscale peer`s).",
        targets: &["net", "chat", "web", "fileserver"],
    },
    Suite {
        name: "quick",
        help: "One representative workload of each micro family, for a first look.",
        targets: &[
            "syscall.null",
            "syscall.pipe",
            "syscall.fork_exit",
            "ipc.tcp",
            "ctx",
            "mem.frd",
            "fs.create",
        ],
    },
];

pub fn find(name: &str) -> Option<&'static Suite> {
    SUITES.iter().find(|s| s.name == name)
}

//! Named suites: `--suite NAME`.

pub struct Suite {
    pub name: &'static str,
    pub help: &'static str,
    /// Workloads or families.
    pub targets: &'static [&'static str],
    /// What `--quick` runs instead, where the whole suite would take too
    /// long for a first look: `study --quick` (micro and macro) must stay
    /// within minutes on a 2-core machine, and each macro case costs a
    /// fixed-duration trial per repetition.
    pub quick: Option<&'static [&'static str]>,
}

impl Suite {
    pub fn targets(&self, quick: bool) -> &'static [&'static str] {
        match self.quick {
            Some(q) if quick => q,
            _ => self.targets,
        }
    }
}

pub static SUITES: &[Suite] = &[
    Suite {
        name: "micro",
        help: "The lmbench-style micro-benchmarks of seed 003: syscall, ipc, ctx, mem, fs.",
        targets: &["syscall", "ipc", "ctx", "mem", "fs"],
        quick: None,
    },
    Suite {
        name: "macro",
        help: "The seeds' macro workloads: servers on the measured CPUs driven by load from \
               the others or from `kscale peer`s (net, chat, web), and a file-serving mix \
               (fileserver).",
        targets: &["net", "chat", "web", "fileserver"],
        // One workload of each family: netperf's request/response (the
        // seeds' Netperf figure) stands for `net`, nginx (the server users
        // have) for `web`.
        quick: Some(&["net.tcp_rr", "chat", "web.nginx", "fileserver"]),
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
        quick: None,
    },
];

pub fn find(name: &str) -> Option<&'static Suite> {
    SUITES.iter().find(|s| s.name == name)
}

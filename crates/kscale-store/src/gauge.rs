//! The gauge's readings of a run: the machine's own speed on each CPU at
//! moments before and through it (docs/noise.md, "The gauge and the
//! control"), kept so that `check`, `compare` and `show` can say how much
//! the machine moved, and recompute it.

use crate::{Result, Store};
use kscale_core::noise::Reading;

impl Store {
    /// Stores the readings of one gauge sample; a CPU's readings are
    /// numbered from `seq` in the order given (0: before the run's first
    /// trial). Returns the next free number.
    pub fn add_gauge(&self, run_id: i64, seq: i64, readings: &[Reading]) -> Result<i64> {
        let mut per_cpu: std::collections::HashMap<usize, i64> = Default::default();
        self.db.transaction(|db| {
            for r in readings {
                let k = per_cpu.entry(r.cpu).or_insert(0);
                let seq = seq + *k;
                *k += 1;
                db.execute(
                    "INSERT INTO gauge (run_id, seq, t_s, cpu, cpu_ns, mem_mbs, wake_us, sys_ns,
                        cpu_mean_ns, cpu_thread_ns, sys_thread_ns)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
                     ON CONFLICT (run_id, seq, cpu) DO UPDATE SET t_s = excluded.t_s,
                        cpu_ns = excluded.cpu_ns, mem_mbs = excluded.mem_mbs,
                        wake_us = excluded.wake_us, sys_ns = excluded.sys_ns,
                        cpu_mean_ns = excluded.cpu_mean_ns,
                        cpu_thread_ns = excluded.cpu_thread_ns,
                        sys_thread_ns = excluded.sys_thread_ns",
                    &[
                        &run_id,
                        &seq,
                        &r.t_s,
                        &(r.cpu as i64),
                        &r.cpu_ns,
                        &r.mem_mbs,
                        &r.wake_us,
                        &r.sys_ns,
                        &r.cpu_mean_ns,
                        &r.cpu_thread_ns,
                        &r.sys_thread_ns,
                    ],
                )?;
            }
            Ok(seq + per_cpu.values().copied().max().unwrap_or(0))
        })
    }

    /// A run's readings in the order they were taken; empty for a run
    /// measured before the gauge existed.
    pub fn gauge(&self, run_id: i64) -> Result<Vec<Reading>> {
        self.db.query_rows(
            "SELECT t_s, cpu, cpu_ns, mem_mbs, wake_us, sys_ns, cpu_mean_ns, cpu_thread_ns,
                    sys_thread_ns FROM gauge
             WHERE run_id = $1
             ORDER BY seq, cpu",
            &[&run_id],
            |r| {
                Ok(Reading {
                    t_s: r.get(0)?,
                    cpu: r.get::<i64>(1)?.max(0) as usize,
                    cpu_ns: r.get(2)?,
                    mem_mbs: r.get(3)?,
                    wake_us: r.get(4)?,
                    sys_ns: r.get(5)?,
                    cpu_mean_ns: r.get(6)?,
                    cpu_thread_ns: r.get(7)?,
                    sys_thread_ns: r.get(8)?,
                })
            },
        )
    }

    /// Records in the run's snapshot (`concurrent`) the other kscale runs
    /// that measured on the machine while it did, so that its results say
    /// so wherever they are shown.
    pub fn note_concurrent(&self, run_id: i64, others: &[String]) -> Result<()> {
        let mut snap = self.run(run_id)?.snapshot;
        snap["concurrent"] = serde_json::json!(others);
        self.db.execute(
            "UPDATE runs SET snapshot = $1 WHERE id = $2",
            &[&serde_json::to_string(&crate::mask_json(&snap))?, &run_id],
        )?;
        Ok(())
    }

    /// The next free sample number of a run (a resumed run goes on after
    /// its stored samples).
    pub fn next_gauge_seq(&self, run_id: i64) -> Result<i64> {
        self.db.query_one(
            "SELECT COALESCE(MAX(seq) + 1, 0) FROM gauge WHERE run_id = $1",
            &[&run_id],
            |r| r.get(0),
        )
    }
}

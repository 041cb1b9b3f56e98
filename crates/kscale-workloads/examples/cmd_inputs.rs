//! Writes the cmd family's generated inputs into a directory, the same bytes
//! a trial uses, so that scripts/validate-cmd can time the same command
//! lines with another tool: `cargo run --release -p kscale-workloads
//! --example cmd_inputs -- DIR`.

fn main() -> anyhow::Result<()> {
    let dir = std::env::args_os()
        .nth(1)
        .ok_or_else(|| anyhow::anyhow!("usage: cmd_inputs DIR"))?;
    let dir = std::path::PathBuf::from(dir);
    std::fs::create_dir_all(&dir)?;
    kscale_workloads::cmd::generate_inputs(&dir, &[])?;
    Ok(())
}

# Sourced by the scripts that run kscale beside a reference tool: keeps idle
# CPUs polling for as long as the sourcing script runs, so the reference
# runs under the idle condition kscale's default (`--cpu-idle auto`) gives
# its own runs. In a virtual machine that is polling, because waking a
# halted vCPU is the host's decision (docs/host.md, "Idle CPUs"); on bare
# metal, or where the request cannot be held (not root), both run with idle
# CPUs as they are. The request is held by a small background shell, not by
# the script, so no server the script starts inherits it; that shell exits
# within a second of the script, however the script ends.
if grep -qw hypervisor /proc/cpuinfo 2>/dev/null || [ -e /sys/hypervisor/type ]; then
  if [ -w /dev/cpu_dma_latency ]; then
    (
      exec 9>/dev/cpu_dma_latency
      printf 0 >&9
      while kill -0 "$$" 2>/dev/null; do sleep 1; done
    ) </dev/null >/dev/null 2>&1 &
    echo "idle CPUs poll for kscale and the reference alike (a 0 µs CPU latency request)" >&2
  else
    echo "idle CPUs as they are for kscale and the reference alike (/dev/cpu_dma_latency needs root)" >&2
  fi
fi

#!/usr/bin/env bash
# The real-host harness's reaper: started by the test process with a pipe on stdin, it waits for
# that pipe to close — the harness closes it when it tears the host down, and the kernel closes
# it when the test runner dies, however it dies — and then removes everything the host was:
# every process in its cgroups (cgroup.kill, falling back to SIGKILL of each PID), the cgroup
# directories (deepest first), its network namespace and its directory. Idempotent.
#
# usage: reaper.sh CGROUP_NAME NETNS_NAME DIR
set -u
name=$1 netns=$2 dir=$3

# Block until stdin reaches EOF (or the harness writes a line to say "now").
read -r _ || true

cgroup_dirs() {
  local base
  for base in /sys/fs/cgroup/unified /sys/fs/cgroup/systemd /sys/fs/cgroup; do
    [[ -d "$base/$name" ]] && printf '%s\n' "$base/$name"
  done
}

for attempt in 1 2 3 4 5 6 7 8 9 10; do
  busy=0
  while read -r cg; do
    [[ -n "$cg" ]] || continue
    if [[ -f "$cg/cgroup.kill" ]]; then echo 1 > "$cg/cgroup.kill" 2>/dev/null || true; fi
    # cgroup v1 has no cgroup.kill: signal every task, in every group below.
    while read -r procs; do
      while read -r pid; do
        [[ -n "$pid" ]] && kill -9 "$pid" 2>/dev/null && busy=1
      done < "$procs"
    done < <(find "$cg" -name cgroup.procs 2>/dev/null)
    # Deepest first: a cgroup directory can only go once it has no children and no tasks.
    find "$cg" -depth -type d -exec rmdir {} \; 2>/dev/null
    [[ -d "$cg" ]] && busy=1
  done < <(cgroup_dirs)
  [[ $busy -eq 0 ]] && break
  sleep 0.2
done

if [[ -n "$netns" ]] && ip netns list 2>/dev/null | grep -qw -- "$netns"; then
  ip netns delete "$netns" 2>/dev/null || true
fi
if [[ -n "$dir" && -d "$dir" ]]; then
  # A machine's rootfs may still hold a bind mount if a host died mid-boot: unmount first.
  grep -F " $dir/" /proc/self/mounts | awk '{print $2}' | sort -r | while read -r m; do
    umount -l "$m" 2>/dev/null || true
  done
  rm -rf --one-file-system -- "$dir" 2>/dev/null || rm -rf -- "$dir" 2>/dev/null || true
fi
echo reaped

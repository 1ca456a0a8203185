/**
 * The NVIDIA driver's user-space libraries, as the host's dynamic linker knows them: the
 * output of `ldconfig -p`, filtered to the driver's libraries of the host's architecture.
 */
import type { OciArch as Arch } from '../oci/types.js';

/** One library of the driver, as `ldconfig -p` lists it. */
export interface CachedLibrary {
  /** The soname or file name (`libcuda.so.1`). */
  readonly name: string;
  /** Absolute host path (`/usr/lib/x86_64-linux-gnu/libcuda.so.1`). */
  readonly path: string;
}

/** The libraries without which no CUDA or NVML program runs: preflight fails without them. */
export const REQUIRED_NVIDIA_LIBRARIES = Object.freeze(['libcuda.so.1', 'libnvidia-ml.so.1']);

/** The driver's libraries: `libnvidia-*`, `libcuda*`, the video and OptiX ones, the GL vendor ones. */
const DRIVER_LIBRARY_RE =
  /^(?:libnvidia-[\w.+-]+|libcuda|libcudadebugger|libnvcuvid|libnvoptix|lib\w+_nvidia)\.so(?:\.\d+)*$/;

/** `ldconfig -p`'s architecture word for a host architecture. */
const LDCONFIG_ARCH: Record<Arch, string> = { amd64: 'x86-64', arm64: 'AArch64' };

/** One cache line: `\tlibcuda.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcuda.so.1`. */
const LINE_RE = /^\s+(\S+) \(([^)]*)\) => (\/\S+)\s*$/;

/**
 * The driver libraries in `ldconfig -p` output for `arch`, first entry per name (the linker's
 * choice), in cache order. Other architectures' entries (32-bit compatibility libraries) are
 * left out: the machine runs programs of the host's architecture.
 */
export function parseLdconfigCache(output: string, arch: Arch): CachedLibrary[] {
  const seen = new Set<string>();
  const libs: CachedLibrary[] = [];
  for (const line of output.split('\n')) {
    const m = LINE_RE.exec(line);
    if (!m) continue;
    const [, name, flags, file] = m as unknown as [string, string, string, string];
    if (!DRIVER_LIBRARY_RE.test(name) || seen.has(name)) continue;
    const words = flags.split(',').map((w) => w.trim());
    if (!words.includes(LDCONFIG_ARCH[arch])) continue;
    seen.add(name);
    libs.push(Object.freeze({ name, path: file }));
  }
  return libs;
}

// Starts the real compactord binary for a test file: built from this repository with `go
// build` (or COMPACTORD_BIN), on a free loopback port.
import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../../..");

export function fixture(name) {
  return readFileSync(join(ROOT, "internal/corpus/testdata", name), "utf8");
}

/** Starts compactord; resolves to { address, stop }. */
export async function startServer() {
  const tmp = mkdtempSync(join(tmpdir(), "compactord-node-"));
  let bin = process.env.COMPACTORD_BIN;
  if (!bin) {
    bin = join(tmp, "compactord");
    execFileSync("go", ["build", "-o", bin, "./cmd/compactord"], { cwd: ROOT, stdio: "inherit" });
  }
  const proc = spawn(bin, ["--listen", "127.0.0.1:0", "--metrics-listen", ""], { stdio: ["ignore", "ignore", "pipe"] });
  const lines = createInterface({ input: proc.stderr });
  const address = await new Promise((ok, fail) => {
    proc.on("exit", (code) => fail(new Error(`compactord exited (${code}) before serving`)));
    lines.on("line", (line) => {
      try {
        const rec = JSON.parse(line);
        if (rec.msg === "serving") ok(rec.addr);
      } catch {
        // not a log record
      }
    });
  });
  return {
    address,
    stop: async () => {
      proc.kill("SIGTERM");
      await new Promise((ok) => proc.once("exit", ok));
      rmSync(tmp, { recursive: true, force: true });
    },
  };
}

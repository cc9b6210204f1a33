//! Code size of tegu-core per registered type (figures in `benches/RESULTS.md`, "Code size per
//! registered type").
//!
//! ```sh
//! cargo run --release -p tegu-codegen --bin codesize -- 100 1000                  # descriptors (what the macros emit)
//! cargo run --release -p tegu-codegen --bin codesize -- --style builder 100 1000  # ProtoDef on the builder
//! cargo run --release -p tegu-codegen --bin codesize -- --style macros 100 1000   # #[context_proto] / #[singleton_proto]
//! ```
//!
//! For each N, writes a throwaway crate under `target/codesize/<style>-<N>/` with N distinct
//! context types, each with a singleton holding `ContextRef<C_i>` and an `#[inline(never)]`
//! function calling `.get()` (the source is `tegu_codegen::codesize`), builds it in release, runs
//! it, and splits the binary's code by symbol (`nm --size-sort -C`): per-type shims against
//! shared code (tegu-core, tokio, std). Run it with two or more N; the bytes per type are the
//! growth between them. The report (Markdown) goes to stdout, progress to stderr.
//!
//! Nothing is written outside `target/codesize/` (the crates are not workspace members and are
//! never committed). Each crate copies the workspace's `Cargo.lock` and builds with `--offline`
//! and its own target directory (`target/codesize/target`), so it neither fetches anything nor
//! waits on the workspace's build lock. Needs `nm`, `size` and `strip` (binutils) on the `PATH`.
//! Sources whose content is unchanged are not rewritten, so cargo's cached build stays.
//! Ported from `benches/scripts/codesize.py`.

use std::error::Error;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

use tegu_codegen::args::choice;
use tegu_codegen::codesize::{self, Measurement, Style};
use tegu_codegen::{workspace_root, write_if_changed};

const USAGE: &str = "usage: codesize [--style descriptor|builder|macros] N [N ...]   (e.g. 100 1000)";

#[derive(Debug)]
struct Args {
    style: Style,
    ns: Vec<usize>,
}

fn parse() -> Result<Args, String> {
    let mut style = Style::Descriptor;
    let mut ns = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--style" => {
                let name = choice(&mut args, "--style", &Style::NAMES)?;
                style = Style::from_name(name).expect("choice returns one of Style::NAMES");
            }
            "-h" | "--help" => return Err(String::new()),
            other if other.starts_with('-') => return Err(format!("unknown argument {other}")),
            n => ns.push(n.parse::<usize>().map_err(|e| format!("N {n}: {e}"))?),
        }
    }
    if ns.is_empty() {
        return Err("at least one N is required".into());
    }
    Ok(Args { style, ns })
}

/// Runs `cmd` with its output captured: its stdout, or an error naming the command, its status
/// and what it wrote to stderr.
fn output(cmd: &mut Command) -> Result<String, Box<dyn Error>> {
    let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        return Err(format!("{cmd:?} failed ({}): {}", out.status, stderr.trim()).into());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Writes the crate of `n` types in `style` under `out`; its directory.
fn generate(root: &Path, out: &Path, style: Style, n: usize) -> Result<PathBuf, Box<dyn Error>> {
    let krate = out.join(codesize::crate_dir(style, n));
    let src = krate.join("src");
    std::fs::create_dir_all(&src).map_err(|e| format!("creating {}: {e}", src.display()))?;
    let write = |path: PathBuf, text: String| {
        write_if_changed(&path, text.as_bytes()).map_err(|e| format!("writing {}: {e}", path.display()))
    };
    write(krate.join("Cargo.toml"), codesize::cargo_toml(style, n, &root.join("tegu-core")))?;
    let lock = krate.join("Cargo.lock");
    if !lock.exists() {
        let workspace_lock = root.join("Cargo.lock");
        std::fs::copy(&workspace_lock, &lock)
            .map_err(|e| format!("copying {} to {}: {e}", workspace_lock.display(), lock.display()))?;
    }
    write(src.join("main.rs"), codesize::main_rs(style, n))?;
    Ok(krate)
}

/// Builds the crate in release with its own target directory under `out`, runs it (it checks
/// its proto count and sum) and returns its binary and the build's seconds.
fn build(out: &Path, krate: &Path, style: Style, n: usize) -> Result<(PathBuf, f64), Box<dyn Error>> {
    let target = out.join("target");
    // The cargo that runs this binary, if any: the same toolchain.
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| OsString::from("cargo"));
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "--release", "--offline", "--manifest-path"])
        .arg(krate.join("Cargo.toml"))
        .env("CARGO_TARGET_DIR", &target)
        // v0 mangling keeps generic arguments in symbol names, so a monomorphized tegu-core
        // function shows which type it was instantiated for. (Cargo would prefer the encoded
        // flags of an outer build to RUSTFLAGS.)
        .env("RUSTFLAGS", "-C symbol-mangling-version=v0")
        .env_remove("CARGO_ENCODED_RUSTFLAGS");
    let start = Instant::now();
    let status = cmd.status().map_err(|e| format!("{cmd:?}: {e}"))?;
    if !status.success() {
        return Err(format!("{cmd:?} failed ({status})").into());
    }
    let seconds = start.elapsed().as_secs_f64();
    let binary = target.join("release").join(format!("codesize-{}", codesize::crate_dir(style, n)));
    let said = output(&mut Command::new(&binary))?;
    eprintln!("  {}", said.trim());
    Ok((binary, seconds))
}

/// Section sizes (`size -A -d`), the code split by symbol (`nm --size-sort -C -S`) and the size
/// of the stripped binary (`strip`, written next to it).
fn analyse(binary: &Path, seconds: f64) -> Result<Measurement, Box<dyn Error>> {
    let size = output(Command::new("size").args(["-A", "-d"]).arg(binary))?;
    let mut sections = codesize::sections(&size);
    let nm = output(Command::new("nm").args(["--size-sort", "-C", "-S"]).arg(binary))?;
    let symbols = codesize::split_symbols(&nm).map_err(|e| format!("{}: {e}", binary.display()))?;
    let mut stripped = binary.as_os_str().to_owned();
    stripped.push(".stripped");
    let stripped = PathBuf::from(stripped);
    output(Command::new("strip").arg("-o").arg(&stripped).arg(binary))?;
    let bytes = std::fs::metadata(&stripped).map_err(|e| format!("{}: {e}", stripped.display()))?.len();
    sections.insert("stripped file".to_owned(), bytes);
    Ok(Measurement { seconds, sections, symbols })
}

/// Every N in turn, then the report. An N given twice is measured twice; the last counts.
fn run(args: &Args) -> Result<String, Box<dyn Error>> {
    let root = workspace_root();
    let out = root.join("target").join("codesize");
    let mut results: Vec<(usize, Measurement)> = Vec::new();
    for &n in &args.ns {
        let krate = generate(&root, &out, args.style, n)?;
        eprintln!("building {} ...", krate.display());
        let (binary, seconds) = build(&out, &krate, args.style, n)?;
        let measured = analyse(&binary, seconds)?;
        match results.iter_mut().find(|(k, _)| *k == n) {
            Some(slot) => slot.1 = measured,
            None => results.push((n, measured)),
        }
    }
    Ok(codesize::report(args.style, &results))
}

fn main() -> ExitCode {
    let args = match parse() {
        Ok(args) => args,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("codesize: {e}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(&args) {
        Ok(report) => {
            print!("{report}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("codesize: {e}");
            ExitCode::FAILURE
        }
    }
}

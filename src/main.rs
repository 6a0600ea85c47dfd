//! The `sessiongraph` binary: parses the command line and hands over to the library.
//! Without a subcommand it serves, with every setting at its default.

use std::process::ExitCode;

use anyhow::Context;
use clap::{CommandFactory, Parser, Subcommand};
use sessiongraph::cli::{self, ExportArgs, HealthcheckArgs, LabelsExportArgs};
use sessiongraph::config::{LogFormat, ServeArgs};
use sessiongraph::AppState;
use tracing_subscriber::EnvFilter;

/// mimalloc: parsing allocates millions of short strings from two threads at once; glibc's
/// allocator spends a third of the load in its own bookkeeping and page faults there.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `purge_delay` option (`mi_option_purge_delay` in `mimalloc.h`; the Rust
/// bindings name no constant for it).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Memory settings for a one-shot `export`, which holds a whole session and writes one
/// body, so that its peak stays near the input's size (1.5 times). Measured on the
/// 273 MiB x100 sample (`examples/export_bench.rs`, workflow view): peak RSS 460 -> 391 MiB
/// (1.68x -> 1.43x the input), for 8% more time (594-609 -> 649-661 ms):
/// - no transparent huge pages: mimalloc asks for them on its arenas, and a 2 MiB page
///   counts whole however little of it is used (415 MiB with this alone);
/// - memory freed by one stage of the build goes back to the system after 50 ms instead
///   of mimalloc's default second, longer than the whole export (429 MiB with this alone;
///   0 or 10 ms purge so often that the export takes a fifth longer).
///
/// The server keeps both defaults: it reuses what it frees, and serves faster with them.
fn hold_export_memory_down() {
    // Not fatal: without it the export only peaks higher.
    if let Err(e) = rustix::thread::disable_transparent_huge_pages(true) {
        tracing::debug!(error = %e, "transparent huge pages stay on");
    }
    // SAFETY: sets one integer option; mimalloc reads it when it next purges.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 50) }
}

/// sessiongraph: coding-agent and multi-agent session logs (Claude Code, pi, AutoGen) as
/// annotation units, workflow DAGs, chat logs and communication graphs, with labels.
#[derive(Debug, Parser)]
#[command(name = "sessiongraph", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the REST API (the default).
    // Boxed: its settings are twice the size of the other subcommands'.
    Serve(Box<ServeArgs>),
    /// Print one view of a session as JSON (the body the HTTP endpoint returns).
    Export(ExportArgs),
    /// Probe a running server's /healthz (for container health checks); exit 0 when healthy.
    Healthcheck(HealthcheckArgs),
    /// Labels: export them (as `GET /api/labels/export` does) without running a server.
    #[command(subcommand)]
    Labels(LabelsCommand),
}

#[derive(Debug, Subcommand)]
enum LabelsCommand {
    /// Print every unit with labels (or all units) with every annotator's labels, the
    /// suggestions and the adjudicated set: JSONL, Label Studio tasks, or Label Studio's
    /// labeling config.
    Export(LabelsExportArgs),
}

/// `serve`'s settings when no subcommand is given: defaults and environment.
#[derive(Debug, Parser)]
struct DefaultServe {
    #[command(flatten)]
    args: ServeArgs,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Some(Command::Export(args)) => {
            if let Err(e) = args.check_flags() {
                usage_error("export", e);
            }
            // Warnings (a sub-agent file left out) and, with RUST_LOG=sessiongraph=debug,
            // the time of each stage, on standard error.
            init_logging(LogFormat::Text, "sessiongraph=warn");
            hold_export_memory_down();
            export_to_stdout(&args)
        }
        Some(Command::Serve(args)) => serve(*args),
        Some(Command::Healthcheck(args)) => cli::healthcheck(&args).map_err(Into::into),
        Some(Command::Labels(LabelsCommand::Export(args))) => labels_export(&args),
        None => serve(DefaultServe::parse_from(["sessiongraph"]).args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // `export ... | head`: the reader has what it wanted. End quietly, as ripgrep does.
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", error_chain(&e));
            ExitCode::FAILURE
        }
    }
}

/// Ends the process as clap ends it on a usage error of `subcommand` (the message, the
/// subcommand's usage, exit status 2).
fn usage_error(subcommand: &str, message: impl std::fmt::Display) -> ! {
    let mut cli = Cli::command();
    // Built, so that the subcommand's usage names the binary.
    cli.build();
    let command = cli
        .find_subcommand_mut(subcommand)
        .unwrap_or_else(|| unreachable!("{subcommand} is a subcommand"));
    command
        .error(clap::error::ErrorKind::ArgumentConflict, message)
        .exit()
}

/// The error and its causes joined with `: `, leaving out a cause whose text the message
/// before it already ends with (errors that print their source, as `io::Error` wrappers
/// often do, would otherwise repeat it).
fn error_chain(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if out.ends_with(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

/// `export` onto standard output.
///
/// Written to the descriptor itself: the standard library's `Stdout` is line-buffered, so
/// it searched every write for its last newline, the whole body (a 192 MB workflow holds
/// none: JSON escapes them) once more.
fn export_to_stdout(args: &ExportArgs) -> anyhow::Result<()> {
    #[cfg(unix)]
    let mut out = {
        use std::os::fd::AsFd;
        let stdout = std::io::stdout().as_fd().try_clone_to_owned();
        std::fs::File::from(stdout.context("failed to open standard output")?)
    };
    #[cfg(not(unix))]
    let mut out = std::io::stdout().lock();
    // The process ends next: the system takes the session's memory back at once, where
    // dropping it would free it allocation by allocation (30-40 ms for the 273 MiB x100
    // sample, a twentieth of its export).
    cli::export(args, &mut out).map(std::mem::forget)?;
    Ok(())
}

/// `labels export` on a runtime of its own.
fn labels_export(args: &LabelsExportArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Runtime::new().context("failed to start the async runtime")?;
    runtime.block_on(cli::labels_export(args, &mut std::io::stdout().lock()))?;
    Ok(())
}

/// True when the error comes from writing to a pipe whose reader has gone.
fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain()
        .filter_map(|c| c.downcast_ref::<std::io::Error>())
        .any(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
}

fn serve(args: ServeArgs) -> anyhow::Result<()> {
    init_logging(args.server.log_format, "sessiongraph=info,tower_http=info");
    let settings = args.app_settings()?;
    for codebook in settings.codebooks.iter() {
        for key in &codebook.repeated_keys {
            // The built-in codebook's repeated `schema_version` is known and documented
            // (codebooks/README.md): said at debug level, not as a warning on every start.
            if codebook.file == sessiongraph::labels::codebook::BUILT_IN_NAME {
                tracing::debug!(file = %codebook.file, key, "the codebook repeats a top-level key; its last value is used");
            } else {
                tracing::warn!(file = %codebook.file, key, "the codebook repeats a top-level key; its last value is used");
            }
        }
    }
    if args.sessions.sessions_dirs.is_empty() && settings.store.sessions_dirs.is_empty() {
        let cwd = std::env::current_dir().unwrap_or_default();
        tracing::warn!(
            cwd = %cwd.display(),
            "no sessions directory: none given (--sessions-dir), and no ./{} here; only uploads are served",
            sessiongraph::config::DEFAULT_SESSIONS_DIR
        );
    }
    let codebook = settings.codebooks.default();
    let api = &settings.api;
    let policy = &settings.label_policy;
    tracing::info!(
        listen = %args.server.listen,
        data_dir = %args.store.data_dir.display(),
        sessions_dirs = ?settings.store.sessions_dirs,
        api_keys = api.api_keys.len(),
        read_only = api.read_only,
        codebook = %codebook.id,
        codebooks = settings.codebooks.iter().count(),
        labels_database = %sessiongraph::labels::store::redact(&settings.database_url),
        upload_store = settings.upload_store.name(),
        reviewers = policy.reviewers.len(),
        blind_labels = policy.blind,
        labels = codebook.labels.len(),
        "starting"
    );
    let listen = args.server.listen;
    if api.api_keys.is_empty() && !listen.ip().is_loopback() {
        tracing::warn!(
            "listening beyond this machine without API keys: anyone who can reach it can read and upload"
        );
    }
    let runtime = tokio::runtime::Runtime::new().context("failed to start the async runtime")?;
    runtime.block_on(async move {
        let state = AppState::build(settings).await?;
        tracing::info!(backend = state.labels.backend().name(), "label database ready");
        let labels = state.labels.clone();
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .with_context(|| format!("failed to listen on {listen}"))?;
        tracing::info!(address = %listener.local_addr()?, "listening");
        let store = state.store.clone();
        sessiongraph::run(listener, state, shutdown_signal()).await?;
        store.close().await;
        labels.close().await;
        tracing::info!("stopped");
        Ok(())
    })
}

/// Logs to standard error, filtered by `RUST_LOG`, else by `default_filter`.
fn init_logging(format: LogFormat, default_filter: &str) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_filter));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

/// Completes on ctrl-c or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = terminate => {},
    }
    tracing::info!("shutting down: finishing requests in flight");
}

//! `mcplug`: Claude Code's `claude mcp` verbs over the very files Claude Code reads and writes
//! (`~/.claude.json`, `<project>/.mcp.json`, the managed file), plus `tools`, `call` and `explain`.
//!
//! A thin front over the engine's Rust API (`mcplug::config`, `mcplug::manager`): this binary
//! parses arguments and prints; it decides nothing the library does not decide for every host.
//! Results go to stdout (`--json`: one JSON document), everything else to stderr. Exit codes are
//! in [`Exit`].

/// What the command line shows a person: on stdout (`say!`, `sayln!`) or stderr (`tell!`,
/// `tellln!`), every control character but newline and tab escaped
/// ([`mcplug::log::for_terminal`]) — names, descriptions, tool output, errors and config text
/// come from servers and files, and must not drive the terminal. `--json` goes through
/// [`show::json`] instead.
macro_rules! say {
    ($($arg:tt)*) => { print!("{}", mcplug::log::for_terminal(&format!($($arg)*))) };
}
macro_rules! sayln {
    ($($arg:tt)*) => { println!("{}", mcplug::log::for_terminal(&format!($($arg)*))) };
}
macro_rules! tell {
    ($($arg:tt)*) => { eprint!("{}", mcplug::log::for_terminal(&format!($($arg)*))) };
}
macro_rules! tellln {
    ($($arg:tt)*) => { eprintln!("{}", mcplug::log::for_terminal(&format!($($arg)*))) };
}

mod edit;
mod live;
mod serve;
mod show;

use clap::{Args, Parser, Subcommand, ValueEnum};
use mcplug::config::Kind;
use mcplug::{Error, ErrorKind};
use std::process::ExitCode;

/// What the exit status of every verb means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    Ok = 0,
    /// The operation ran and failed: a server could not be reached, a tool returned an error.
    Failed = 1,
    /// The command line or its input is wrong (bad flag, invalid JSON, invalid entry).
    Usage = 2,
    /// No such server or tool.
    NotFound = 3,
    /// The server needs authorization first (`mcplug login NAME`).
    NeedsAuth = 4,
}

impl Exit {
    /// The exit status of an error from the library.
    pub fn of(e: &Error) -> Exit {
        match e.kind {
            ErrorKind::InvalidArgument => Exit::Usage,
            ErrorKind::NotFound => Exit::NotFound,
            ErrorKind::NeedsAuth => Exit::NeedsAuth,
            _ => Exit::Failed,
        }
    }
}

const EXIT_CODES: &str = "Exit status: 0 success; 1 the operation failed (a server unreachable, a \
tool error); 2 bad command line or input; 3 no such server or tool; 4 the server needs \
authentication (run `mcplug login NAME`).\n\nLogs: --debug, or MCPLUG_LOG=<filter> \
(for example MCPLUG_LOG=mcplug::wire=trace for every message), on stderr.";

#[derive(Parser)]
#[command(
    name = "mcplug",
    version,
    about = "Configure and use MCP servers: Claude Code's `claude mcp` commands over the same files",
    after_help = EXIT_CODES
)]
struct Cli {
    #[command(subcommand)]
    verb: Verb,
    /// Print one JSON document on stdout instead of text (for scripts).
    #[arg(long, global = true)]
    json: bool,
    /// Log what the library does to stderr (as MCPLUG_LOG=debug).
    #[arg(long, global = true)]
    debug: bool,
    /// Seconds to wait for servers to connect (and for a call or a login to finish).
    #[arg(long, global = true, value_name = "SECONDS", default_value_t = 30.0)]
    timeout: f64,
    /// A configuration file of servers (`{"mcpServers": {…}}`) on top of the configured ones
    /// (repeatable), as Claude Code's `--mcp-config`; the managed policy applies to them.
    #[arg(long = "mcp-config", global = true, value_name = "FILE")]
    mcp_config: Vec<String>,
    /// Only the servers of the `--mcp-config` files, none of the configured ones (the managed
    /// policy still applies).
    #[arg(long = "strict-mcp-config", global = true)]
    strict_mcp_config: bool,
    /// Mark the servers the official MCP registry knows (or the registry at URL), as Claude
    /// Code does (`--registry=URL` for another registry); `list` shows the marks. No request
    /// when CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC is set.
    #[arg(long, global = true, value_name = "URL", num_args = 0..=1, require_equals = true, default_missing_value = "")]
    registry: Option<String>,
}

#[derive(Subcommand)]
enum Verb {
    /// Connect to every configured server and show how each is.
    List,
    /// Show one server's configuration and whether it connects.
    Get { name: String },
    /// Add a server: `add NAME -- COMMAND ARGS…` (stdio) or `add --transport http NAME URL`.
    Add(AddArgs),
    /// Add a server from its JSON entry: `add-json NAME '{"type":"http","url":"…"}'`.
    #[command(name = "add-json")]
    AddJson {
        #[arg(short, long, value_enum, default_value_t = Scope::Local)]
        scope: Scope,
        name: String,
        /// The entry, as it would sit under `mcpServers`.
        #[arg(value_name = "JSON")]
        entry: String,
    },
    /// Remove a server (from the one scope that has it, or the one named).
    Remove {
        name: String,
        #[arg(short, long, value_enum)]
        scope: Option<Scope>,
    },
    /// Import the MCP servers of Claude Desktop's configuration (all, or the ones named), as
    /// Claude Code's add-from-claude-desktop; a name already taken gets a suffix (_1, _2, …).
    #[command(name = "add-from-claude-desktop")]
    AddFromClaudeDesktop {
        #[arg(short, long, value_enum, default_value_t = Scope::Local)]
        scope: Scope,
        /// Only these servers of Claude Desktop's (default: every one).
        names: Vec<String>,
    },
    /// Approve a project (.mcp.json) server, as Claude Code's dialog does
    /// (.claude/settings.local.json `enabledMcpjsonServers`).
    Approve {
        name: String,
        /// Approve every project server from now on (`enableAllProjectMcpServers`), as the
        /// dialog's "use this and all future MCP servers in this project".
        #[arg(long)]
        all: bool,
    },
    /// Reject a project (.mcp.json) server (`disabledMcpjsonServers`).
    Reject { name: String },
    /// Forget every approval and rejection of this project's servers.
    #[command(name = "reset-project-choices")]
    ResetProjectChoices,
    /// Authorize a remote server with OAuth, in the system browser.
    Login { name: String },
    /// Forget a remote server's stored OAuth credentials.
    Logout { name: String },
    /// List the tools of every connected server (or of one).
    Tools { name: Option<String> },
    /// Call a server's tool: `call NAME TOOL '{"arg": 1}'` (`-` reads the arguments from stdin).
    Call {
        name: String,
        tool: String,
        /// The arguments, a JSON object (default {}).
        arguments: Option<String>,
    },
    /// Show every configured server, and why each one left out was left out.
    Explain,
    /// Serve the configured servers as one MCP server over stdio (for Claude Desktop, Cursor, …).
    Serve(serve::ServeArgs),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Scope {
    /// ~/.claude.json, under this project (private to you here).
    Local,
    /// ./.mcp.json (shared with the project).
    Project,
    /// ~/.claude.json (every project of yours).
    User,
}

impl Scope {
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Local => "local",
            Scope::Project => "project",
            Scope::User => "user",
        }
    }
}

/// `--transport`: the library's own list of transports (each by its own name; `sdk` is a
/// host's in-process server, not one a command line adds).
fn transport() -> impl clap::builder::TypedValueParser<Value = Kind> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(
        Kind::TYPES
            .iter()
            .filter(|(name, kind)| *name == kind.as_str() && *kind != Kind::Sdk)
            .map(|(name, _)| *name),
    )
    .map(|name: String| Kind::from_type(&name).expect("a name of Kind::TYPES"))
}

#[derive(Args)]
pub struct AddArgs {
    #[arg(short, long, value_enum, default_value_t = Scope::Local)]
    pub scope: Scope,
    #[arg(short, long, value_parser = transport(), default_value = "stdio")]
    pub transport: Kind,
    /// An environment variable for a stdio server (repeatable).
    #[arg(short, long = "env", value_name = "KEY=VALUE")]
    pub env: Vec<String>,
    /// A header for a remote server (repeatable).
    #[arg(short = 'H', long = "header", value_name = "'Name: value'")]
    pub header: Vec<String>,
    /// The OAuth client id registered for this server (remote servers).
    #[arg(long)]
    pub client_id: Option<String>,
    /// The environment variable holding the OAuth client secret (never the secret itself).
    #[arg(long, value_name = "VAR")]
    pub client_secret_env: Option<String>,
    /// The fixed loopback port of the OAuth redirect (when the client id was registered with one).
    #[arg(long)]
    pub callback_port: Option<u16>,
    pub name: String,
    /// The command (stdio) or the URL (http, sse, ws).
    pub command_or_url: String,
    /// The command's arguments (after `--` if any starts with `-`).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub args: Vec<String>,
}

/// What every verb gets besides its own arguments.
pub struct Ctx {
    pub json: bool,
    pub timeout: std::time::Duration,
    /// The `--mcp-config` files' servers, read once.
    pub given: Option<serde_json::Map<String, serde_json::Value>>,
    pub strict: bool,
    /// `--registry`: the registry's base URL.
    pub registry: Option<String>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if cli.debug && std::env::var_os(mcplug::log::LOG_ENV).is_none() {
        // Before any thread starts: nothing reads the environment concurrently yet.
        std::env::set_var(mcplug::log::LOG_ENV, "debug");
    }
    mcplug::log::init();
    if !(cli.timeout.is_finite() && cli.timeout > 0.0 && cli.timeout < 86_400.0) {
        tellln!("mcplug: --timeout must be a number of seconds above 0 and below a day");
        return ExitCode::from(Exit::Usage as u8);
    }
    let given = if cli.strict_mcp_config && cli.mcp_config.is_empty() {
        Err(Error::invalid(
            "--strict-mcp-config needs at least one --mcp-config FILE",
        ))
    } else if cli.mcp_config.is_empty() {
        Ok(None)
    } else {
        live::given_servers(&cli.mcp_config).map(Some)
    };
    let given = given.and_then(|g| {
        let registry = match cli.registry.as_deref() {
            None => None,
            Some("") => Some(mcplug::manager::registry::OFFICIAL.to_string()),
            Some(url) => {
                mcplug::manager::registry::Registry::new(url).map_err(|_| {
                    Error::invalid(format!("--registry must be an http(s) URL (got {url:?})"))
                })?;
                Some(url.to_string())
            }
        };
        Ok((g, registry))
    });
    let (given, registry) = match given {
        Ok(g) => g,
        Err(e) => {
            tellln!("mcplug: {}", e.message);
            return ExitCode::from(Exit::of(&e) as u8);
        }
    };
    let ctx = Ctx {
        json: cli.json,
        timeout: std::time::Duration::from_secs_f64(cli.timeout),
        given,
        strict: cli.strict_mcp_config,
        registry,
    };
    let outcome = match cli.verb {
        Verb::List => live::list(&ctx),
        Verb::Get { name } => live::get(&ctx, &name),
        Verb::Add(a) => edit::add(&ctx, &a),
        Verb::AddJson { scope, name, entry } => edit::add_json(&ctx, scope, &name, &entry),
        Verb::Remove { name, scope } => edit::remove(&ctx, &name, scope),
        Verb::AddFromClaudeDesktop { scope, names } => {
            edit::add_from_claude_desktop(&ctx, scope, &names)
        }
        Verb::Approve { name, all } => {
            edit::choose(&ctx, &name, if all { "yes_all" } else { "yes" })
        }
        Verb::Reject { name } => edit::choose(&ctx, &name, "no"),
        Verb::ResetProjectChoices => edit::reset_choices(&ctx),
        Verb::Login { name } => live::login(&ctx, &name),
        Verb::Logout { name } => live::logout(&ctx, &name),
        Verb::Tools { name } => live::tools(&ctx, name.as_deref()),
        Verb::Call {
            name,
            tool,
            arguments,
        } => live::call(&ctx, &name, &tool, arguments.as_deref()),
        Verb::Explain => live::explain(&ctx),
        Verb::Serve(a) => serve::serve(&ctx, &a),
    };
    match outcome {
        Ok(code) => ExitCode::from(code as u8),
        Err(e) => {
            if ctx.json {
                show::json(&e.to_json());
            }
            tellln!("mcplug: {}", e.message);
            ExitCode::from(Exit::of(&e) as u8)
        }
    }
}

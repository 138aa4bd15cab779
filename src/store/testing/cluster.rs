//! A throwaway PostgreSQL cluster for the tests of one process: Debian's server binaries, a data
//! directory under the system temp dir keyed by the process id, no TCP (a Unix socket in that
//! directory), no fsync. Each test asks for a database of its own ([`Cluster::create_database`]).
//!
//! A third, [`durable_cluster`], syncs every commit to disk (`fsync`, `synchronous_commit` and
//! `full_page_writes` on), for the benchmark's `--durable` figures. [`own_cluster`] starts one
//! that its caller owns and may stop and start again, for the tests of a server that goes away.
//!
//! The cluster is started once, on first use. Test processes end without running destructors,
//! so a small watchdog shell started beside the server stops it (`pg_ctl stop -m immediate`) and
//! removes the directory once this process is gone, however it ended; a directory left by a
//! process whose watchdog was killed too is cleaned up by the next run.
//!
//! A test that restarts the server starts a cluster of its own ([`Cluster::own`]), since the
//! shared one serves other tests at the same moment.
//!
//! A second cluster, started on first use of [`tls_cluster`], serves TLS on a loopback TCP port
//! with a certificate for `localhost` signed by a CA made for it (`openssl`), for the tests of
//! `sslmode`: the CA, and another CA that signed nothing of it, are files beside it.
//!
//! initdb refuses to run as root, as tests do here and in CI: then the server runs as the
//! `postgres` system user that Debian's package creates (`runuser`). Without the binaries the
//! tests fail, saying how to install them: CI always has them, and a skipped test proves nothing.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// What to do when the server binaries are missing.
const INSTALL: &str = "PostgreSQL not installed: run scripts/test-deps (it installs Debian's \
                       `postgresql` package; the store tests run on it as well as on SQLite)";

/// The running cluster.
#[derive(Clone)]
pub(crate) struct Cluster {
    dir: PathBuf,
    /// The TCP port it also listens on, over TLS, on 127.0.0.1 (`None`: Unix socket only).
    port: Option<u16>,
    /// The server's binaries and options, to start it again ([`Cluster::start_again`]).
    bin: PathBuf,
    options: String,
}

/// How a cluster runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flavour {
    /// A Unix socket, nothing synced.
    Throwaway,
    /// TLS on a loopback port too.
    Tls,
    /// A Unix socket, every commit synced to disk.
    Durable,
}

/// The cluster whose commits are synced to disk, started on first use.
#[allow(dead_code)] // Only the benchmark measures with it.
pub(crate) fn durable_cluster() -> &'static Cluster {
    static CLUSTER: OnceLock<Result<Cluster, String>> = OnceLock::new();
    match CLUSTER.get_or_init(|| Cluster::start_with(Flavour::Durable, "-durable")) {
        Ok(cluster) => cluster,
        Err(why) => panic!("{why}"),
    }
}

/// A throwaway cluster of the caller's own (`name` tells its directory apart), which it may
/// [`Cluster::stop`] and [`Cluster::start_again`]: no other test's database is on it.
#[allow(dead_code)] // Only some test binaries stop a server.
pub(crate) fn own_cluster(name: &str) -> Cluster {
    Cluster::start_with(Flavour::Throwaway, &format!("-{name}"))
        .unwrap_or_else(|why| panic!("{why}"))
}

/// The TLS cluster: its certificates are [`Cluster::ca`] and [`Cluster::other_ca`].
#[allow(dead_code)] // Some test binaries that include this file test no TLS.
pub(crate) fn tls_cluster() -> &'static Cluster {
    static CLUSTER: OnceLock<Result<Cluster, String>> = OnceLock::new();
    match CLUSTER.get_or_init(|| Cluster::start_with(Flavour::Tls, "-tls")) {
        Ok(cluster) => cluster,
        Err(why) => panic!("{why}"),
    }
}

/// The cluster of this process, started on first use; panics with the reason it cannot start.
pub(crate) fn cluster() -> &'static Cluster {
    static CLUSTER: OnceLock<Result<Cluster, String>> = OnceLock::new();
    match CLUSTER.get_or_init(Cluster::start) {
        Ok(cluster) => cluster,
        Err(why) => panic!("{why}"),
    }
}

impl Cluster {
    fn start() -> Result<Cluster, String> {
        Cluster::start_with(Flavour::Throwaway, "")
    }

    fn start_with(flavour: Flavour, suffix: &str) -> Result<Cluster, String> {
        let tls = flavour == Flavour::Tls;
        let bin = server_binaries().ok_or_else(|| INSTALL.to_owned())?;
        let root = std::env::temp_dir();
        remove_stale(&root, &bin);
        let dir = root.join(format!("baton-pg-{}{suffix}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        let port = if tls {
            certificates(&dir)?;
            Some(free_port()?)
        } else {
            None
        };
        if as_root() {
            run(
                Command::new("chown").arg("-R").arg("postgres:").arg(&dir),
                "chown",
            )?;
        }
        let data = dir.join("data");
        run(
            server_command(&bin, "initdb")
                .arg("-D")
                .arg(&data)
                .args(["-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8"])
                .arg("--locale=C"),
            "initdb",
        )?;
        let listen = match port {
            None => "-c listen_addresses=''".to_owned(),
            Some(port) => format!(
                "-c listen_addresses=127.0.0.1 -p {port} -c ssl=on -c ssl_cert_file={0}/server.crt \
                 -c ssl_key_file={0}/server.key",
                dir.display()
            ),
        };
        let syncs = match flavour {
            Flavour::Durable => "-c fsync=on -c synchronous_commit=on -c full_page_writes=on",
            Flavour::Throwaway | Flavour::Tls => {
                "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
            }
        };
        let options = format!(
            "{listen} -k {} {syncs} -c shared_buffers=16MB -c max_connections=300",
            dir.display()
        );
        let cluster = Cluster {
            dir,
            port,
            bin,
            options,
        };
        cluster.start_again();
        watchdog(&cluster.bin, &cluster.dir)?;
        Ok(cluster)
    }

    /// Starts the server (again, after [`Cluster::stop`]); panics if it does not start.
    pub(crate) fn start_again(&self) {
        run(
            server_command(&self.bin, "pg_ctl")
                .arg("-D")
                .arg(self.dir.join("data"))
                .arg("-l")
                .arg(self.dir.join("server.log"))
                .args(["-w", "-o", &self.options, "start"]),
            "pg_ctl start",
        )
        .unwrap_or_else(|why| panic!("{why}"));
    }

    /// Stops the server the way an operator's restart does (`pg_ctl stop -m fast`: every
    /// connection is ended); panics if it does not stop.
    #[allow(dead_code)] // Only some test binaries stop a server.
    pub(crate) fn stop(&self) {
        run(
            server_command(&self.bin, "pg_ctl")
                .arg("-D")
                .arg(self.dir.join("data"))
                .args(["-w", "-m", "fast", "stop"]),
            "pg_ctl stop",
        )
        .unwrap_or_else(|why| panic!("{why}"));
    }

    /// `pg_ctl restart -m fast`: every connection is ended, and the server is back when this
    /// returns; panics if it does not come back.
    #[allow(dead_code)] // Only some test binaries restart a server.
    pub(crate) fn restart(&self) {
        run(
            server_command(&self.bin, "pg_ctl")
                .arg("-D")
                .arg(self.dir.join("data"))
                .arg("-l")
                .arg(self.dir.join("server.log"))
                .args(["-w", "-m", "fast", "-o", &self.options, "restart"]),
            "pg_ctl restart",
        )
        .unwrap_or_else(|why| panic!("{why}"));
    }

    /// Stop it at once and remove its directory (a cluster of one's own, done with).
    #[allow(dead_code)] // Only some test binaries have a server of their own.
    pub(crate) fn remove(&self) {
        let _ = Command::new("sh")
            .args(["-c", &stop_script(&self.bin, &self.dir)])
            .status();
    }

    /// libpq-style connection settings for database `name` on this cluster (its Unix socket).
    pub(crate) fn url(&self, name: &str) -> String {
        let port = self.port.map_or(String::new(), |p| format!(" port={p}"));
        format!(
            "host={}{port} user=postgres dbname={name}",
            self.dir.display()
        )
    }

    /// The TCP port it serves TLS on (the TLS cluster only).
    #[allow(dead_code)] // Some test binaries that include this file test no TLS.
    pub(crate) fn tls_port(&self) -> u16 {
        self.port.expect("the TLS cluster listens on TCP")
    }

    /// The PEM file of the CA that signed the TLS cluster's certificate.
    #[allow(dead_code)] // Some test binaries that include this file test no TLS.
    pub(crate) fn ca(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }

    /// The PEM file of a CA that signed nothing the cluster serves.
    #[allow(dead_code)] // Some test binaries that include this file test no TLS.
    pub(crate) fn other_ca(&self) -> PathBuf {
        self.dir.join("other-ca.pem")
    }

    /// Creates a new, empty database and returns its name. Blocking: call it off the async
    /// workers.
    pub(crate) fn create_database(&self) -> String {
        let name = format!("t_{}", uuid::Uuid::new_v4().simple());
        let mut client = postgres::Client::connect(&self.url("postgres"), postgres::NoTls)
            .unwrap_or_else(|e| panic!("connecting to the test cluster: {e}"));
        client
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .unwrap_or_else(|e| panic!("creating a test database: {e}"));
        name
    }
}

/// A CA (`ca.pem`), a server certificate for `localhost` it signed (`server.crt`, `server.key`)
/// and a second CA (`other-ca.pem`), in `dir`.
fn certificates(dir: &Path) -> Result<(), String> {
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    for ca in ["ca", "other-ca"] {
        run(
            Command::new("openssl")
                .current_dir(dir)
                .args(["req", "-x509", "-days", "3", "-subj"])
                .arg(format!("/CN=baton test {ca}"))
                .args(ec)
                .args([
                    "-keyout",
                    &format!("{ca}.key"),
                    "-out",
                    &format!("{ca}.pem"),
                ])
                .args(["-addext", "basicConstraints=critical,CA:TRUE"])
                .args(["-addext", "keyUsage=critical,keyCertSign,cRLSign"]),
            "openssl req (a test CA)",
        )?;
    }
    run(
        Command::new("openssl")
            .current_dir(dir)
            .args(["req", "-subj", "/CN=localhost"])
            .args(ec)
            .args(["-keyout", "server.key", "-out", "server.csr"]),
        "openssl req (the server's key)",
    )?;
    std::fs::write(
        dir.join("server.ext"),
        "subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\n\
         extendedKeyUsage=serverAuth\n",
    )
    .map_err(|e| format!("writing server.ext: {e}"))?;
    run(
        Command::new("openssl").current_dir(dir).args([
            "x509",
            "-req",
            "-days",
            "3",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-extfile",
            "server.ext",
            "-out",
            "server.crt",
        ]),
        "openssl x509 (the server's certificate)",
    )?;
    std::fs::set_permissions(
        dir.join("server.key"),
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .map_err(|e| format!("restricting server.key: {e}"))
}

/// A TCP port on 127.0.0.1 nothing listens on now.
fn free_port() -> Result<u16, String> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("finding a free port: {e}"))
}

/// The newest installed server's `bin` directory (Debian: `/usr/lib/postgresql/<major>/bin`).
fn server_binaries() -> Option<PathBuf> {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let major = entry.file_name().to_str()?.parse().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").is_file().then_some((major, bin))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, bin)| bin)
}

fn as_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// `tool` from `bin`, run as the `postgres` user when this process is root.
fn server_command(bin: &Path, tool: &str) -> Command {
    let path = bin.join(tool);
    if as_root() {
        let mut command = Command::new("runuser");
        command.args(["-u", "postgres", "--"]).arg(path);
        command
    } else {
        Command::new(path)
    }
}

fn run(command: &mut Command, what: &str) -> Result<(), String> {
    let output = command
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("running {what}: {e}"))?;
    if output.status.success() {
        return Ok(());
    }
    Err(format!(
        "{what} failed ({}): {}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    ))
}

/// The shell commands that stop the cluster in `dir` and remove it.
fn stop_script(bin: &Path, dir: &Path) -> String {
    let runuser = if as_root() {
        "runuser -u postgres -- "
    } else {
        ""
    };
    format!(
        "{runuser}'{}' -D '{}/data' stop -m immediate >/dev/null 2>&1; rm -rf '{}'",
        bin.join("pg_ctl").display(),
        dir.display(),
        dir.display()
    )
}

/// Starts the shell that waits for this process to end, then stops the cluster.
fn watchdog(bin: &Path, dir: &Path) -> Result<(), String> {
    let script = format!(
        "while kill -0 {} 2>/dev/null; do sleep 1; done; {}",
        std::process::id(),
        stop_script(bin, dir)
    );
    Command::new("sh")
        .args(["-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map(drop)
        .map_err(|e| format!("starting the test cluster's watchdog: {e}"))
}

/// Stops and removes the clusters of test processes that are gone.
fn remove_stale(root: &Path, bin: &Path) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("baton-pg-"))
            .and_then(|p| p.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = Command::new("sh")
                .args(["-c", &stop_script(bin, &entry.path())])
                .status();
        }
    }
}

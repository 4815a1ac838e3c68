//! The command line: `framepipe`'s subcommands and `run`'s flags, as clap parses them.

use clap::{Parser, Subcommand};

use crate::doctor;

#[derive(Parser, Debug)]
#[command(
    name = "framepipe",
    version,
    about = "A parallel real-time video frame pipeline engine"
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Subcommand, Debug)]
#[allow(clippy::large_enum_variant)] // parsed once at start; boxing `run`'s flags saves nothing
pub(crate) enum Command {
    /// Run a pipeline (a gst-launch-like string or a TOML project file), or several shows at once.
    Run(Box<RunArgs>),
    /// Show what would run: every node with its element, kind, negotiated size and inputs
    /// (nothing is started, no sink is created).
    Graph(GraphArgs),
    /// List every element: native ones and each frei0r plugin found (type, colour model, parameters).
    Plugins {
        /// Also show plugins that failed to load, with why.
        #[arg(long)]
        verbose: bool,
    },
    /// Show one element: its properties with types, ranges and defaults.
    Inspect {
        /// Element name, e.g. frei0r-glow.
        name: String,
        /// Properties that choose what the node is, as in a pipeline: `mix transition=NAME`
        /// (mode=transition implied) lists that gl-transition mix's properties.
        props: Vec<String>,
    },
    /// List the ALSA sequencer's MIDI input ports (names for `run --midi NAME`).
    MidiPorts,
    /// List the audio hosts (ALSA, JACK) and their input devices with their default formats:
    /// the values `run --audio` takes for live input.
    AudioDevices,
    /// Can this machine hold a show? Timer, wake-up, CPU noise, real-time permission,
    /// bandwidth, plugins; with a project, each node's headroom at its frame rate.
    Doctor(doctor::DoctorArgs),
    /// List the displays a `windowsink` can go to (index, name, size, position, primary).
    Displays,
}

#[derive(clap::Args, Debug)]
pub(crate) struct GraphArgs {
    /// "element prop=value ! element ..." or a path to a .toml project file.
    pub(crate) pipeline: String,
    /// Print Graphviz `dot` source instead of text (`| dot -Tsvg > graph.svg`).
    #[arg(long)]
    pub(crate) dot: bool,
    /// Memory budget for frames and everything sized by input, as for `run`.
    #[arg(long, value_name = "SIZE")]
    pub(crate) max_memory: Option<String>,
}

#[derive(clap::Args, Debug)]
pub(crate) struct RunArgs {
    /// "element prop=value ! element ..." or a path to a .toml project file. Several: that
    /// many shows in one process, each with its own name (docs/SHOWS.md).
    #[arg(required = true, value_name = "SHOW")]
    pub(crate) shows: Vec<String>,
    /// Worker threads (default: one per core; at most 4 per core).
    #[arg(long)]
    pub(crate) threads: Option<usize>,
    /// Frames in flight at most (default: 2 * threads + 2, fewer for large frames: at most 96 MiB
    /// of them, never below threads + 1; at most 256).
    #[arg(long)]
    pub(crate) in_flight: Option<usize>,
    /// Memory budget for frames and everything sized by input, e.g. 512M, 4G (default: a
    /// quarter of physical memory, between 1 GiB and 8 GiB).
    #[arg(long, value_name = "SIZE")]
    pub(crate) max_memory: Option<String>,
    /// GPU memory budget for textures (GPU nodes' outputs, uploads, their own buffers), e.g.
    /// 512M, 4G (default: 2 GiB; docs/GPU.md).
    #[arg(long, value_name = "SIZE")]
    pub(crate) max_gpu_memory: Option<String>,
    /// Write statistics as JSON to this file at the end.
    #[arg(long)]
    pub(crate) stats: Option<String>,
    /// Pace the output at this rate (e.g. 30, 30000/1001, 29.97). Default: the source's rate.
    #[arg(long, conflicts_with = "unpaced")]
    pub(crate) fps: Option<String>,
    /// Run as fast as the pipeline goes (batch rendering).
    #[arg(long)]
    pub(crate) unpaced: bool,
    /// When a frame is late: `slow` (never drop or repeat; the clock slips) or `live` (the clock
    /// holds; the previous frame is shown again).
    #[arg(long, default_value = "slow")]
    pub(crate) overload: String,
    /// Report a stage as stalled when one frame takes longer than this many ms
    /// (default: five frame periods, at least 100 ms).
    #[arg(long)]
    pub(crate) stall_timeout: Option<u64>,
    /// Paced runs: begin each frame this many ms before its deadline: a command reaches the
    /// output within about a period plus this. Default: the graph's measured latency with a
    /// margin. Unpaced runs are never held back.
    #[arg(long, value_name = "MS")]
    pub(crate) latency: Option<u64>,
    /// Do not try SCHED_FIFO for the output thread.
    #[arg(long)]
    pub(crate) no_realtime: bool,
    /// Paced runs: no standby pacing thread. By default a second pacing thread, kept off
    /// the CPU of the output (or a host's clock) thread, releases any frame that thread
    /// has not released 0.25 ms after its deadline (it lost its CPU, as on a busy VM); this
    /// saves the standby's wake-up per deadline on a machine that never does that.
    #[arg(long)]
    pub(crate) no_standby: bool,
    /// Start paused: nothing is output until a `step` or `resume` command.
    #[arg(long)]
    pub(crate) start_paused: bool,
    /// Where commands come from: `stdin` (one per line; the default unless a source reads
    /// stdin) or `none`. SIGINT/SIGTERM stop the run either way.
    #[arg(long)]
    pub(crate) control: Option<String>,
    /// Take commands as Open Sound Control messages on UDP: `PORT` listens on 127.0.0.1,
    /// `ADDR:PORT` where asked (0.0.0.0:PORT: every network). Addresses in docs/CONTROL.md.
    #[arg(long, value_name = "[ADDR:]PORT")]
    pub(crate) osc: Option<String>,
    /// Serve the control page (graph, controls, stats, preview) on http://ADDR:PORT
    /// (default 127.0.0.1:8080; 127.0.0.1:0 picks a free port). The URL is printed at start.
    /// Off loopback a token is required (--web-token, or one is generated and printed).
    /// With several shows, `/` lists them and each show's page is `/shows/NAME/`.
    #[arg(long, value_name = "[ADDR:]PORT", num_args = 0..=1, default_missing_value = "")]
    pub(crate) web: Option<String>,
    /// The token the web page's requests must carry (`?token=T`); required off loopback.
    #[arg(long, value_name = "T", requires = "web")]
    pub(crate) web_token: Option<String>,
    /// The node the web page previews (default: the master sink's input), through a leaky
    /// `monitor` tap. With several shows there is no preview unless this names a node, which
    /// every show then previews.
    #[arg(long, value_name = "NODE", requires = "web")]
    pub(crate) web_preview: Option<String>,
    /// Let the web page `load` the project files in DIR by their name (`load scene2.toml
    /// fade=2s`: DIR/scene2.toml, a regular file directly in DIR). Without it the page may not
    /// load; it never opens another path (docs/WEB.md).
    #[arg(long, value_name = "DIR", requires = "web")]
    pub(crate) scenes: Option<std::path::PathBuf>,
    /// Run every frei0r plugin in a child process, as if each node had `isolate=true`: a
    /// plugin that crashes or hangs is reported, its node bypassed or held, the plugin
    /// restarted (docs/ISOLATION.md).
    #[arg(long)]
    pub(crate) isolate_plugins: bool,
    /// Take MIDI in: an ALSA sequencer port whose name contains PORT (`framepipe midi-ports`
    /// lists them), or a raw MIDI device or FIFO when PORT is a path (`/dev/snd/midiC1D0`).
    /// `learn NODE.PROPERTY` binds a control; docs/MIDI.md. With several shows, one input for
    /// all: each project's own mappings drive its show (`@NAME learn ...` on stdin).
    #[arg(long, value_name = "PORT")]
    pub(crate) midi: Option<String>,
    /// With --osc: serve OSCQuery (the OSC address space as JSON over HTTP, listened values
    /// over a WebSocket) on this TCP address: `PORT` on 127.0.0.1, or `ADDR:PORT`. Default: the
    /// --osc address with a port the OS chooses (printed at start). docs/OSC.md. With several
    /// shows, one subtree per show: /NAME/framepipe/...
    #[arg(long, value_name = "[ADDR:]PORT")]
    pub(crate) oscquery: Option<String>,
    /// Audio the show follows (`~audio:` bindings: `blur=~audio:bass:0..1`, docs/AUDIO.md): a
    /// file or stream any ffmpeg reads (`track.wav`, `set.mp3`, a URL), decoded as fast as it
    /// goes; frame N reads the audio at its timestamp (the first frame's is 0), so a render's
    /// values depend on the file and N only.
    #[arg(long, value_name = "SOURCE")]
    pub(crate) audio: Option<String>,
    /// The audio analysis' band edges, Hz (default 20,250,2000,6000,20000: bass, low-mid,
    /// high-mid, treble); `band0`.. follow them.
    #[arg(long, value_name = "HZ,HZ,...", requires = "audio")]
    pub(crate) audio_bands: Option<String>,
    /// Do not advertise OSCQuery and OSC over mDNS (`_oscjson._tcp`, `_osc._udp`).
    #[arg(long)]
    pub(crate) no_mdns: bool,
    /// No status line.
    #[arg(long, short)]
    pub(crate) quiet: bool,
    /// Write the run's progress as `key=value` blocks every 0.5 s, as ffmpeg's `-progress`
    /// does (frame=, total_frames=, fps=, out_time_us=, speed=, eta_us=, then
    /// progress=continue, or progress=end after the last): to FILE, or to standard output
    /// with `-`. Written with -q and without a terminal too.
    #[arg(long, value_name = "FILE|-")]
    pub(crate) progress: Option<String>,
}

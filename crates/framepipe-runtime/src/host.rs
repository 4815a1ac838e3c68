//! Many shows in one process (issue #11): a [`Host`] runs several prepared shows, each with its
//! own name, rate, overload policy, sinks, commands and statistics.
//!
//! First step: each show runs on a thread of its own (its own workers and output thread). The
//! shared worker pool and the one clock thread replace this behind the same API.

use framepipe_core::{Error, Result};

use crate::pipeline::Prepared;
use crate::stats::RunStats;

/// How one show of a [`Host`] ended.
#[derive(Debug)]
pub struct ShowResult {
    /// The show's name, as given to [`Host::add`].
    pub name: String,
    /// Its final figures, or the error that ended it (that show only: the others go on).
    pub result: Result<RunStats>,
}

/// Several shows in one process.
#[derive(Debug)]
pub struct Host {
    threads: usize,
    shows: Vec<(String, Prepared)>,
}

impl Host {
    /// A host whose shows share `threads` workers (0 = one per available core).
    pub fn new(threads: usize) -> Self {
        let threads = if threads == 0 {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        } else {
            threads
        };
        Host {
            threads,
            shows: Vec::new(),
        }
    }

    /// The worker threads the shows share. Each show must be prepared with this many
    /// (`Options::threads`).
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// How many shows were added.
    pub fn len(&self) -> usize {
        self.shows.len()
    }

    /// Whether no show was added.
    pub fn is_empty(&self) -> bool {
        self.shows.is_empty()
    }

    /// Adds a show under `name` (unique in the host). Its commands, events and editor are set
    /// on the `Prepared` beforehand, as for a run of its own.
    pub fn add(&mut self, name: impl Into<String>, show: Prepared) -> Result<()> {
        let name = name.into();
        if self.shows.iter().any(|(n, _)| *n == name) {
            return Err(Error::Pipeline(format!(
                "two shows are named '{name}'; give each show a name of its own"
            )));
        }
        if show.threads() != self.threads {
            return Err(Error::Pipeline(format!(
                "show '{name}' was prepared for {} worker threads, the host has {}",
                show.threads(),
                self.threads
            )));
        }
        self.shows.push((name, show));
        Ok(())
    }

    /// Runs every show to its end (its source's end, an error, or its `stop`) and returns how
    /// each ended, in the order they were added. `on_end` is called as each show ends, in the
    /// order they end (on the calling thread).
    pub fn run(self, mut on_end: impl FnMut(&ShowResult)) -> Vec<ShowResult> {
        let n = self.shows.len();
        let (tx, rx) = std::sync::mpsc::channel();
        let mut names = Vec::with_capacity(n);
        for (i, (name, show)) in self.shows.into_iter().enumerate() {
            names.push(name.clone());
            let tx2 = tx.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("fp-show-{i}"))
                .spawn(move || {
                    let result = show.run();
                    let _ = tx2.send((i, ShowResult { name, result }));
                });
            if let Err(e) = spawned {
                let result = Err(Error::io("starting a show's thread", e));
                let _ = tx.send((
                    i,
                    ShowResult {
                        name: names[i].clone(),
                        result,
                    },
                ));
            }
        }
        drop(tx);
        let mut results: Vec<Option<ShowResult>> = (0..n).map(|_| None).collect();
        for (i, r) in rx {
            on_end(&r);
            results[i] = Some(r);
        }
        results
            .into_iter()
            .zip(names)
            .map(|(r, name)| {
                r.unwrap_or_else(|| ShowResult {
                    name,
                    result: Err(Error::Pipeline(
                        "the show's thread ended without a result".into(),
                    )),
                })
            })
            .collect()
    }
}

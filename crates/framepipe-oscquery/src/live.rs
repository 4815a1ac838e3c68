//! The running show as a [`ShowSource`]: the runtime's [`ShowView`] (graph and latest values,
//! read without the scheduler's lock) and [`Counters`] (tempo, pause; atomics).

use std::sync::Arc;

use framepipe_runtime::{Counters, GraphView, ShowView, ValuesView};

use crate::model::{NodeModel, ShowModel, ShowSource, Values};

/// A running show, read through its published view.
#[derive(Debug)]
pub struct LiveShow {
    view: ShowView,
    counters: Arc<Counters>,
    graph: Arc<GraphView>,
    model: Arc<ShowModel>,
    buf: ValuesView,
    /// The show's audio bands (0: no audio).
    audio_bands: usize,
}

/// The surfaces' model of a runtime graph: every node but the automatic ones.
pub fn model_of(g: &GraphView) -> ShowModel {
    ShowModel {
        version: g.version,
        nodes: g
            .nodes
            .iter()
            .filter(|n| !n.auto)
            .map(|n| NodeModel {
                name: n.name.clone(),
                element: n.element.clone(),
                kind: n.kind.to_string(),
                props: n.props.clone(),
                bypassable: n.bypassable,
            })
            .collect(),
        audio_bands: 0,
    }
}

impl LiveShow {
    /// Reads `view` (from `Prepared::view`) and `counters` (`Prepared::counters`).
    pub fn new(view: ShowView, counters: Arc<Counters>) -> Self {
        let graph = view.graph();
        let model = Arc::new(model_of(&graph));
        LiveShow {
            view,
            counters,
            graph,
            model,
            buf: ValuesView::default(),
            audio_bands: 0,
        }
    }

    /// The show has audio (`--audio`) with `bands` bands: `/framepipe/audio` lists its
    /// analysis (level, peak, flux, onsets, tempo, each band), read-only.
    pub fn with_audio(mut self, bands: usize) -> Self {
        self.audio_bands = bands;
        let mut m = (*self.model).clone();
        m.audio_bands = bands;
        self.model = Arc::new(m);
        self
    }
}

impl ShowSource for LiveShow {
    fn model(&mut self) -> Arc<ShowModel> {
        let g = self.view.graph();
        if !Arc::ptr_eq(&g, &self.graph) {
            let mut m = model_of(&g);
            m.audio_bands = self.audio_bands;
            self.model = Arc::new(m);
            self.graph = g;
        }
        Arc::clone(&self.model)
    }

    fn read(&mut self, model: &ShowModel, values: &mut Values) -> bool {
        let fresh = self.view.read(&mut self.buf);
        let mut changed = false;
        let empty = values.props.len() != model.nodes.len();
        // Values of another graph version than `model`'s are left for the next poll.
        if (fresh || empty) && self.buf.version == model.version {
            let mut props = Vec::with_capacity(model.nodes.len());
            let mut bypassed = Vec::with_capacity(model.nodes.len());
            for (i, n) in self.graph.nodes.iter().enumerate() {
                if n.auto {
                    continue;
                }
                props.push(
                    self.buf
                        .values
                        .get(i)
                        .map(|v| v.iter().cloned().map(Some).collect())
                        .unwrap_or_default(),
                );
                bypassed.push(self.buf.bypass.get(i).copied().unwrap_or(false));
            }
            if props != values.props || bypassed != values.bypassed {
                values.props = props;
                values.bypassed = bypassed;
                changed = true;
            }
        }
        let tempo = Some(self.counters.tempo_bpm());
        let paused = Some(self.counters.paused());
        if tempo != values.tempo_bpm || paused != values.paused {
            values.tempo_bpm = tempo;
            values.paused = paused;
            changed = true;
        }
        if self.audio_bands > 0 {
            let a = self.counters.audio();
            let audio = (a.frames > 0).then(|| crate::model::AudioValues {
                level: a.level.into(),
                peak: a.peak.into(),
                flux: a.flux.into(),
                onsets: a.onsets,
                tempo_bpm: a.tempo_bpm.into(),
                bands: a.bands[..self.audio_bands.min(a.bands.len())]
                    .iter()
                    .map(|&b| b.into())
                    .collect(),
            });
            if audio != values.audio {
                values.audio = audio;
                changed = true;
            }
        }
        changed
    }
}

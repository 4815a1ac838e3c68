//! What the `oscquery_query` fuzz target and the suite's seeded version check of
//! [`framepipe_oscquery::answer`], the server's answer to `GET PATH?QUERY` on a show.
//!
//! Beyond "no panic": the status is one the server documents (200, 204, 400, 404); a 200
//! carries JSON, anything else a one-line text whose length does not grow with the request's
//! (a path or attribute quoted in it is cut); the answer does not depend on what follows the
//! attribute (`?VALUE&x` is `?VALUE`).

use framepipe_core::{PropKind, PropSpec, PropValue};
use framepipe_oscquery::{answer, NodeModel, ShowModel, Values};

/// A show of two nodes with a property of each kind.
pub fn show() -> (ShowModel, Values) {
    let props = vec![
        PropSpec::new(
            "value",
            PropKind::Float {
                min: 0.0,
                max: 10.0,
            },
            PropValue::Float(1.0),
            "a number",
        ),
        PropSpec::new(
            "n",
            PropKind::Int { min: -5, max: 5 },
            PropValue::Int(0),
            "",
        ),
        PropSpec::new("on", PropKind::Bool, PropValue::Bool(true), ""),
        PropSpec::new("what", PropKind::Str, PropValue::Str("x".into()), ""),
        PropSpec::new(
            "mode",
            PropKind::Enum(vec!["a".into(), "b".into()]),
            PropValue::Str("a".into()),
            "",
        ),
        PropSpec::new(
            "color",
            PropKind::Color,
            PropValue::Color([1.0, 0.0, 0.0]),
            "",
        ),
    ];
    let model = ShowModel {
        version: 1,
        nodes: vec![
            NodeModel {
                name: "s".into(),
                element: "stamp".into(),
                kind: "effect".into(),
                props,
                bypassable: true,
            },
            NodeModel {
                name: "stamp#2".into(),
                element: "stamp".into(),
                kind: "effect".into(),
                props: vec![],
                bypassable: false,
            },
        ],
        audio_bands: 0,
    };
    let values = Values::defaults(&model);
    (model, values)
}

/// Checks the answer to the request target `target` (`PATH` or `PATH?QUERY`); its status.
pub fn check(target: &str, model: &ShowModel, values: &Values) -> u16 {
    let (path, query) = match target.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (target, None),
    };
    let a = answer(model, values, path, query);
    match a.status.as_u16() {
        200 => assert!(a.json.is_some(), "{target:?}: 200 without JSON"),
        204 | 400 | 404 => {
            assert!(a.json.is_none(), "{target:?}");
            assert!(
                a.text.trim_end_matches('\n').lines().count() <= 1,
                "{target:?}: {:?}",
                a.text
            );
            // A quoted path of 60 characters, each escaped as `\u{NN}` at worst, and the words.
            assert!(a.text.len() <= 600, "{target:?}: {} bytes", a.text.len());
        }
        s => panic!("{target:?}: status {s}"),
    }
    if let Some(q) = query {
        let attr = q.split(['&', '=']).next().unwrap_or("");
        if attr.len() < q.len() {
            assert_eq!(answer(model, values, path, Some(attr)), a, "{target:?}");
        }
    }
    a.status.as_u16()
}

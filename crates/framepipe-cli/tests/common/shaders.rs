//! ISF test shaders shared by the GPU tests: exact in 8 bits on any GL (an addition of a whole
//! number of levels, an inversion), so expected pictures are computed in the test.

/// Adds `amount` (0..255 scale, default 10) to R, G and B; alpha kept.
pub const ADD: &str = r#"/*{
    "ISFVSN": "2",
    "CATEGORIES": ["Test"],
    "INPUTS": [
        {"NAME": "inputImage", "TYPE": "image"},
        {"NAME": "amount", "TYPE": "float", "DEFAULT": 10.0, "MIN": -255.0, "MAX": 255.0}
    ]
}*/
void main() {
    vec4 c = IMG_THIS_PIXEL(inputImage);
    gl_FragColor = vec4(c.rgb + amount / 255.0, c.a);
}
"#;

/// 255 - R, G, B; alpha kept (a GPU effect whose output differs from its input everywhere).
pub const INVERT: &str = r#"/*{
    "ISFVSN": "2",
    "INPUTS": [{"NAME": "inputImage", "TYPE": "image"}]
}*/
void main() {
    vec4 c = IMG_THIS_PIXEL(inputImage);
    gl_FragColor = vec4(1.0 - c.rgb, c.a);
}
"#;

/*{
  "DESCRIPTION": "Test: ISF 1.0 (no ISFVSN): a persistent buffer declared the old way, vv_ names",
  "PERSISTENT_BUFFERS": ["trail"],
  "PASSES": [ { "TARGET": "trail" } ]
}*/
void main() {
    vec4 old = IMG_NORM_PIXEL(trail, vv_FragNormCoord);
    gl_FragColor = old + vec4(0.25);
}

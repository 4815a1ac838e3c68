/*{
  "DESCRIPTION": "framepipe spec check: a PERSISTENT buffer (feedback across frames): a soft spot moving with TIME leaves a fading trail; FRAMEINDEX tints it.",
  "CREDIT": "framepipe, MIT",
  "ISFVSN": "2",
  "CATEGORIES": ["Test"],
  "INPUTS": [
    { "NAME": "decay", "TYPE": "float", "MIN": 0.0, "MAX": 1.0, "DEFAULT": 0.75 }
  ],
  "PASSES": [
    { "TARGET": "trail", "PERSISTENT": true },
    { }
  ]
}*/

void main() {
  if (PASSINDEX == 0) {
    vec4 prev = IMG_NORM_PIXEL(trail, isf_FragNormCoord);
    vec2 pos = vec2(8.0 + 48.0 * TIME, 12.0 + 24.0 * TIME);
    float spot = smoothstep(7.0, 2.0, distance(gl_FragCoord.xy, pos));
    vec4 now = vec4(spot, 0.5 * spot, float(FRAMEINDEX) / 8.0 * spot, 1.0);
    gl_FragColor = max(prev * decay, now);
  } else {
    gl_FragColor = vec4(IMG_NORM_PIXEL(trail, isf_FragNormCoord).rgb, 1.0);
  }
}

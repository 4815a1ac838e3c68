/*{
  "ISFVSN": "2",
  "DESCRIPTION": "Test: a persistent float accumulator, a half-size pass, and the output reading both",
  "INPUTS": [
    { "NAME": "step", "TYPE": "float", "DEFAULT": 0.0625, "MIN": 0.0, "MAX": 1.0 }
  ],
  "PASSES": [
    { "TARGET": "acc", "PERSISTENT": true, "FLOAT": true },
    { "TARGET": "small", "WIDTH": "$WIDTH/2", "HEIGHT": "floor($HEIGHT/2)" },
    {}
  ]
}*/
void main() {
    if (PASSINDEX == 0) {
        gl_FragColor = IMG_THIS_PIXEL(acc) + vec4(step);
    } else if (PASSINDEX == 1) {
        gl_FragColor = vec4(RENDERSIZE / 255.0, 0.0, 1.0);
    } else {
        vec4 a = IMG_THIS_PIXEL(acc);
        vec4 h = IMG_NORM_PIXEL(small, isf_FragNormCoord);
        gl_FragColor = vec4(a.r, h.r, h.g, 1.0);
    }
}

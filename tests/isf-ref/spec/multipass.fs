/*{
  "DESCRIPTION": "framepipe spec check: three passes, the first into a buffer sized by WIDTH/HEIGHT expressions (a quarter of the output), the second upscales it into a full-size buffer, the last mixes; PASSINDEX, RENDERSIZE, IMG_SIZE, IMG_NORM_PIXEL; TIME-driven generator.",
  "CREDIT": "framepipe, MIT",
  "ISFVSN": "2",
  "CATEGORIES": ["Test"],
  "INPUTS": [
    { "NAME": "speed", "TYPE": "float", "MIN": 0.0, "MAX": 1.0, "DEFAULT": 0.25 }
  ],
  "PASSES": [
    { "TARGET": "small", "WIDTH": "$WIDTH/4", "HEIGHT": "$HEIGHT/4" },
    { "TARGET": "large" },
    { }
  ]
}*/

const float TAU = 6.2831853;

void main() {
  vec2 p = isf_FragNormCoord;
  if (PASSINDEX == 0) {
    // a smooth pattern, drawn at a quarter of the size; RENDERSIZE is the buffer's here
    gl_FragColor = vec4(0.5 + 0.5 * sin(TAU * (p.x + speed * TIME)),
                        p.y,
                        0.5 + 0.5 * cos(TAU * p.y + TIME),
                        RENDERSIZE.x / 64.0);
  } else if (PASSINDEX == 1) {
    // upscaled with linear filtering; IMG_SIZE says the small buffer's size
    vec4 s = IMG_NORM_PIXEL(small, p);
    gl_FragColor = vec4(s.rgb, IMG_SIZE(small).y / RENDERSIZE.y);
  } else {
    vec4 l = IMG_NORM_PIXEL(large, p);
    // the small buffer's stored alpha (its own width / 64) and the ratio of the sizes
    // (0.25): wrong sizes show as wrong colours
    gl_FragColor = vec4(l.r, mix(l.g, l.a * 4.0, 0.5), mix(l.b, IMG_NORM_PIXEL(small, p).a * 4.0, 0.5), 1.0);
  }
}

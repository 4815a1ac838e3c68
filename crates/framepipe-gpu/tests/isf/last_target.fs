/*{
  "ISFVSN": "2",
  "DESCRIPTION": "Test: one pass, into a persistent buffer, which is the output",
  "PASSES": [ { "TARGET": "acc", "PERSISTENT": true } ]
}*/
void main() {
    gl_FragColor = IMG_THIS_PIXEL(acc) + vec4(0.25);
}

/*{
  "ISFVSN": "2",
  "DESCRIPTION": "Test: the frame's clock as colour",
  "INPUTS": []
}*/
void main() {
    gl_FragColor = vec4(TIME / 4.0, float(FRAMEINDEX) / 255.0, TIMEDELTA * 15.0, 1.0);
}

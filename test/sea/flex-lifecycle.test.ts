// test/flex/lifecycle.test.ts again, against the single executable dist/sea/twinvol (issue 11: the
// end-to-end FlexVolume suites run against both builds). use-sea must be imported first.
import './use-sea.js';
import '../flex/lifecycle.test.js';

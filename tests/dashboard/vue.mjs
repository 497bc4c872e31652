// The three Vue calls the composables make, without reactivity: the harness reads the
// state once the request has been answered.
export const ref = (value) => ({ value });
export const reactive = (target) => target;
export const computed = (getter) => ({ get value() { return getter(); } });

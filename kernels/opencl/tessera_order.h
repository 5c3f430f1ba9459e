// tessera_order.h: tessera_lt(a, b), "a sorts before b" in NumPy's sort order, shared by
// sort.cl and the searchsorted kernel of gather.cl. Floats: NaN last. Complex: (re, im)
// lexicographic, an element with a NaN component after every other, and among those
// NumPy's order, component by component. Integers and bool: plain <.

#ifdef TESSERA_COMPLEX
// a < b in NumPy's complex sort order: (re, im) lexicographic, NaN components last.
inline int tessera_lt(T a, T b)
{
    const int an = isnan(a.x) || isnan(a.y), bn = isnan(b.x) || isnan(b.y);
    if (an || bn) {
        if (!an)
            return 1;
        if (!bn)
            return 0;
        // Both have a NaN: NumPy orders re-NaN after im-NaN ... compare component-wise.
        if (isnan(a.x) != isnan(b.x))
            return isnan(b.x);
        if (!isnan(a.x) && a.x != b.x)
            return a.x < b.x;
        if (isnan(a.y) != isnan(b.y))
            return isnan(b.y);
        return !isnan(a.y) && a.y < b.y;
    }
    return a.x < b.x || (a.x == b.x && a.y < b.y);
}
#elif defined(TESSERA_FLOAT)
inline int tessera_lt(T a, T b) { return a < b || (isnan(b) && !isnan(a)); }
#else
inline int tessera_lt(T a, T b) { return a < b; }
#endif

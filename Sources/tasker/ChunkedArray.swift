/// An append-only array in fixed chunks: growing never copies what is
/// there (a plain array doubling to 200,000 entries copies and faults in
/// about twice its size, which showed in the cost of recording a run).
struct ChunkedArray<Element> {
    private var chunks: [[Element]] = []
    private(set) var count = 0
    private let filler: Element
    static var chunkSize: Int { 4096 }

    init(filler: Element) { self.filler = filler }

    mutating func append(_ e: Element) {
        if count % Self.chunkSize == 0 {
            chunks.append([])
            chunks[chunks.count - 1].reserveCapacity(Self.chunkSize)
        }
        chunks[chunks.count - 1].append(e)
        count += 1
    }

    /// Grows with `filler` until `index` exists.
    mutating func extend(through index: Int) {
        while count <= index { append(filler) }
    }

    subscript(i: Int) -> Element {
        get { chunks[i / Self.chunkSize][i % Self.chunkSize] }
        set { chunks[i / Self.chunkSize][i % Self.chunkSize] = newValue }
    }
}
